from django.db import models


class Row(models.Model):
    """One chat line, as in every Channels tutorial."""

    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.body
