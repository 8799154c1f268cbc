"""`make screenshots`: PNGs of each Console view at 1440×900 and 390×844, light and dark, taken
from a real server (the browser tests' own: `manage.py serve` on free ports, a database of its own,
the fake model server) in Debian's Chromium.

    python -m tests.console.screenshots [FOLDER]   (default docs/screenshots)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from tests.console.api import LiveApi
from tests.console.assistant import MODEL_NAME, assistant_settings
from tests.console.browser import launched, require_chromium
from tests.console.pages import create_project, create_thread, send, sign_in_admin
from tests.console.server import PASSWORD, ROOT, LiveServer, serving
from tests.console.suite_runs import store_compared, store_history
from tests.support.console_pages import TIMEOUT_MS, sign_in
from tests.support.model_servers import FakeModel, serve_fake_model

SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
REPLY = """Here is **the plan** for the release:

1. Freeze the branch on *Monday*.
2. Run the full suite and the benchmarks.
3. Tag and publish.

```
make test && make bench
```

| step | owner |
|------|-------|
| freeze | ada |
| publish | the assistant |

Details in [the release notes](https://example.com/notes)."""
STREAMING = " ".join(["Reading", "the", "thread", "and", "drafting", "an", "answer"] * 12)


class Shooter:
    def __init__(self, browser: Browser, server: LiveServer, model: FakeModel, folder: Path):
        self.browser, self.server, self.model, self.folder = browser, server, model, folder

    def page(self, size: str, *, dark: bool = False, listener: str = "human") -> Page:
        width, height = SIZES[size]
        context = self.browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme="dark" if dark else "light",
        )
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        if listener == "tester":
            page.goto(f"{self.server.tester_url}/")
        else:
            sign_in(page, self.server.human_url)
        return page

    def shoot(self, page: Page, name: str, size: str) -> None:
        path = self.folder / f"{name}-{size}.png"
        page.screenshot(path=str(path))
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)

    @staticmethod
    def new_thread(page: Page, name: str) -> None:
        """A new thread, from the list (on a phone the open thread hides it)."""
        back = page.get_by_role("button", name="Back to the threads")
        if back.is_visible():
            back.click()
        create_thread(page, name)

    def answered_thread(self, page: Page, project: str) -> None:
        self.model.content = REPLY
        create_project(page, project)
        create_thread(page, "Release plan")
        send(page, "What is the plan for the release?")
        expect(page.locator('[data-from="assistant"]')).to_have_count(1)

    def views(self, size: str) -> None:
        width, height = SIZES[size]
        page = self.browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{self.server.human_url}/signin")
        self.shoot(page, "signin", size)
        page.close()

        for dark in (False, True):
            page = self.page(size, dark=dark)
            self.answered_thread(page, f"Launch {size}{' dark' if dark else ''}")
            self.shoot(page, "human-dark" if dark else "human", size)
            if size == "phone" and not dark:
                self.shoot(page, "phone-conversation", size)
                page.get_by_role("button", name="Back to the threads").click()
                self.shoot(page, "phone-list", size)
                page.get_by_role("tab", name="Trail").click()
                self.shoot(page, "phone-trail", size)
            page.context.close()

        page = self.page(size, listener="tester")
        self.answered_thread(page, f"Tester {size}")
        self.shoot(page, "tester", size)

        self.model.content, self.model.chunk_delay = STREAMING, 0.3
        self.new_thread(page, "Streaming")
        send(page, "Write me a long answer")
        expect(page.locator(".message.draft")).to_contain_text("drafting an answer Reading")
        self.shoot(page, "streaming", size)
        page.get_by_role("button", name="Stop", exact=True).click()
        expect(page.locator(".turn-state")).to_contain_text("Stopped")
        # What had streamed stays, marked stopped.
        expect(page.locator(".message.partial")).to_be_visible()
        self.shoot(page, "stopped", size)
        page.evaluate("location.hash = '#thread=999999999'")
        expect(page.locator("#thread-badge")).to_have_text("Not found")
        self.shoot(page, "thread-not-found", size)

        self.model.chunk_delay, self.model.status = 0.0, 400
        self.model.error_message = "the model 'console-model' does not exist"
        self.new_thread(page, "Failed turn")
        send(page, "Will this work?")
        expect(page.locator('.turn-state[data-state="failed"]')).to_be_visible()
        self.shoot(page, "failed", size)
        self.model.status = 200
        page.context.close()

        self.test_runs(size)
        self.versions(size)
        self.start_typing(size)
        self.trail_views(size)

    def test_runs(self, size: str) -> None:
        """The tester's test runs, light and dark: the list, a run compared with the one before
        it (a regression, a fix, a new case, a failure), and a run's comparison with its
        baseline, a regressed case's replies side by side (stacked on a phone)."""
        api = LiveApi(self.server.tester_url)
        history = store_history(api)
        compared = store_compared(api, self.model)
        api.close()
        for dark in (False, True):
            suffix = "-dark" if dark else ""
            page = self.page(size, dark=dark, listener="tester")
            page.get_by_role("link", name="Test runs").click()
            run = page.locator(f'.test-run-choice[data-id="{history.second["id"]}"]')
            expect(run).to_be_visible()
            self.shoot(page, f"test-runs{suffix}", size)
            run.click()
            expect(page.locator(".case")).to_have_count(3)
            self.shoot(page, f"test-run{suffix}", size)
            page.goto(f"{self.server.tester_url}/#run={compared.second['id']}")
            regressed = page.locator("#compared-cases .compared").first
            regressed.get_by_text("Replies side by side").click()
            expect(regressed.locator(".reply-side")).to_have_count(2)
            regressed.scroll_into_view_if_needed()
            self.shoot(page, f"test-run-comparison{suffix}", size)
            page.context.close()

    def versions(self, size: str) -> None:
        """A turn asked again ("‹ 2/2 ›" and its new reply), and a branch from that reply: its
        source under its title, and the conversation it carries, set apart."""
        page = self.page(size)
        self.answered_thread(page, f"Versions {size}")
        self.model.content = "A second take: freeze on *Tuesday*, then tag and publish."
        shown = page.locator("#messages > li:visible")
        reply = shown.and_(page.locator('[data-from="assistant"]'))
        reply.get_by_role("button", name="Regenerate", exact=True).click()
        expect(shown.locator(".version-count")).to_have_text("2/2")
        expect(reply).to_contain_text("A second take")
        self.shoot(page, "versions", size)
        reply.get_by_role("button", name="Branch from here").click()
        expect(page.locator("#carried")).to_be_visible()
        self.shoot(page, "branch", size)
        page.context.close()

    def start_typing(self, size: str) -> None:
        """Light and dark: "New chat"'s empty composer, the chat it started (named from
        the first words), the export menu, a rename refused beside its field, and staff told
        whose Console it is."""
        self.model.content = REPLY
        for dark in (False, True):
            suffix = "-dark" if dark else ""
            page = self.page(size, dark=dark)
            create_project(page, f"Start {size}{suffix}")
            self.new_thread(page, "Release plan")
            page.get_by_role("button", name="New chat").click()
            page.get_by_label("Message", exact=True).fill("What is the plan for the release?")
            self.shoot(page, f"new-chat{suffix}", size)
            page.get_by_label("Message", exact=True).press("Enter")
            expect(page.locator('[data-from="assistant"]')).to_have_count(1)
            self.shoot(page, f"started-chat{suffix}", size)
            page.locator("#thread-export > summary").click()
            self.shoot(page, f"export{suffix}", size)
            page.locator("#thread-export > summary").click()
            page.get_by_role("button", name="Rename").click()
            page.get_by_label("New name of this thread").fill("Release plan")
            page.get_by_role("button", name="Save").click()
            expect(page.locator("#rename-notice")).to_have_attribute("data-kind", "error")
            self.shoot(page, f"rename-refused{suffix}", size)
            page.context.close()

            width, height = SIZES[size]
            staff = self.browser.new_page(
                viewport={"width": width, "height": height},
                color_scheme="dark" if dark else "light",
            )
            staff.goto(f"{self.server.human_url}/admin/login/")
            staff.fill("#id_username", "staff")
            staff.fill("#id_password", PASSWORD)
            staff.locator("input[type=submit]").click()
            staff.wait_for_url(f"{self.server.human_url}/admin/")
            staff.goto(f"{self.server.human_url}/")
            expect(staff.locator("#not-the-human")).to_be_visible()
            self.shoot(staff, f"staff{suffix}", size)
            staff.close()

    def trail_views(self, size: str) -> None:
        """Light and dark: the human's trail with a tester turn's long body opened,
        claims and leases shown; filtered to the tester's rows; folded away (a wide screen);
        and the admin's trail list and a thread's messages inline."""
        api = LiveApi(self.server.tester_url)
        project = api.create_project(f"Tester trail {size}")
        thread = api.create_thread(project, f"Tester checks {size}")
        lines = [f"Step {n}: ask about the release and check the answer." for n in range(8)]
        api.send(thread, "\n".join(lines))
        api.close()
        width, height = SIZES[size]
        for dark in (False, True):
            suffix = "-dark" if dark else ""
            page = self.page(size, dark=dark)
            self.answered_thread(page, f"Trail {size}{suffix}")
            if size == "phone":
                page.get_by_role("button", name="Back to the threads").click()
                page.get_by_role("tab", name="Trail").click()
            page.get_by_label("Claims and leases").check()
            page.locator(".trail-row.by-tester").get_by_role("button", name="more").first.click()
            self.shoot(page, f"trail{suffix}", size)
            filters = page.get_by_role("group", name="Show in the trail")
            filters.get_by_role("button", name="Tester only").click()
            self.shoot(page, f"trail-tester{suffix}", size)
            if size == "desktop":
                page.get_by_role("button", name="Hide trail").click()
                self.shoot(page, f"trail-folded{suffix}", size)
            page.context.close()

            admin = self.browser.new_page(
                viewport={"width": width, "height": height},
                color_scheme="dark" if dark else "light",
            )
            sign_in_admin(admin, self.server.human_url)
            admin.goto(f"{self.server.human_url}/admin/broker/trailrow/")
            self.shoot(admin, f"admin-trail{suffix}", size)
            admin.goto(f"{self.server.human_url}/admin/broker/thread/{thread}/change/")
            admin.get_by_role("region", name="Messages").scroll_into_view_if_needed()
            self.shoot(admin, f"admin-thread{suffix}", size)
            admin.close()


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    chromium = require_chromium()
    with (
        serve_fake_model(FakeModel(models=[MODEL_NAME])) as model,
        tempfile.TemporaryDirectory() as scratch,
        serving(Path(scratch), "screens", settings=assistant_settings(model.url)) as server,
        launched(chromium) as browser,
    ):
        shooter = Shooter(browser, server, model, folder)
        for size in SIZES:
            shooter.views(size)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots")
