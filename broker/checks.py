"""System checks for stored businesses (filled in by the business loader work)."""
