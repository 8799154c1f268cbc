"""The settings of the servers the tests start (`manage.py serve`, `migrate`, `setupdemo`): the
product's own, with a fast password hasher. The production hasher spends half a second of CPU on
each sign-in on purpose, and the browser tests sign in by the hundred; what a sign-in proves does
not depend on the hasher's cost (the test process does the same, `fast_password_hashing`)."""

from mosaic.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
