"""What the tests are written with: helpers, fake servers and pytest plugins the tests and
conftests import. No test lives here."""
