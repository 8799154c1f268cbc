"""The live server's chat API over real HTTP, sent as the listeners' own pages send it."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.listeners import write_headers


class LiveApi:
    """One listener's API: keeps cookies, and sends writes with the page's own headers."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client = httpx.Client(base_url=base_url, timeout=10)

    def close(self) -> None:
        self.client.close()

    def write_headers(self) -> dict[str, str]:
        return write_headers(self.base_url, self.client.cookies.get("csrftoken"))

    def get(self, path: str) -> Any:
        answer = self.client.get(path)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        answer = self.client.post(path, json=body, headers=self.write_headers())
        assert answer.status_code in (200, 201), answer.text
        return answer.json()

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        answer = self.client.patch(path, json=body, headers=self.write_headers())
        assert answer.status_code == 200, answer.text
        return answer.json()

    def sign_in(self, username: str, password: str) -> None:
        self.post("/api/auth/login", {"username": username, "password": password})

    def create_project(self, name: str) -> int:
        return int(self.post("/api/chat/projects", {"name": name})["project"]["id"])

    def create_thread(self, project: int, name: str) -> int:
        answer = self.post("/api/chat/threads", {"project": project, "name": name})
        return int(answer["thread"]["id"])

    def send(self, thread: int, body: str) -> int:
        answer = self.post(f"/api/chat/threads/{thread}/messages", {"body": body})
        return int(answer["message"]["id"])
