"""Fail closed at start-up: no listener or long-running command starts on a refused business.

System checks do not run under an ASGI server, so the ASGI module and long-running commands
call `refuse_invalid_businesses` themselves (R4, R5).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from broker.checks import stored_business_problems


def refuse_invalid_businesses() -> None:
    """Raise `ImproperlyConfigured` listing every stored business or role that R4 or R5 refuses."""
    problems = [f"{problem.id}: {problem.msg}" for problem in stored_business_problems()]
    if problems:
        raise ImproperlyConfigured(
            "Refusing to start while a stored business is refused: " + "; ".join(problems)
        )
