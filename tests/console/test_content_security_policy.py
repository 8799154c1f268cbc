"""The pages' Content-Security-Policy in a real browser: the API docs page and the
admin's pages load and work under it with no violation (the Consoles' own tests cover both
Consoles: `open_console` fails any test that meets a violation), and the browser does refuse an
inline script, which the tests are told of."""

from __future__ import annotations

from playwright.sync_api import Browser, Route, expect

from tests.console.api import LiveApi
from tests.console.pages import create_project, create_thread, sign_in_admin, unique
from tests.console.server import LiveServer
from tests.support.console_pages import CSP_VIOLATION, REPORT_CSP_VIOLATIONS, OpenConsole


def with_inline_script(route: Route) -> None:
    answer = route.fetch()
    page = answer.text().replace("</head>", "<script>window.injected = true</script></head>")
    route.fulfill(response=answer, body=page)


def test_inline_script_is_refused_and_reported(
    browser: Browser, console_server: LiveServer
) -> None:
    """An injected inline script does not run, and the violation reaches the console the tests
    read: what `open_console` fails a test on."""
    context = browser.new_context()
    try:
        context.add_init_script(REPORT_CSP_VIOLATIONS)
        page = context.new_page()
        # The sign-in page as the server sends it, its policy too, with an inline script added:
        # as a template's mistake, or a reply past the sanitizer, would put one there.
        page.route("**/signin", with_inline_script)
        with page.expect_console_message(
            lambda message: message.text.startswith(CSP_VIOLATION)
        ) as reported:
            page.goto(f"{console_server.human_url}/signin")
        assert "script-src-elem blocked inline" in reported.value.text
        assert page.evaluate("window.injected === undefined")
    finally:
        context.close()


def test_api_docs_render_on_both_listeners(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """Swagger UI's start-up script comes from the page's own address, not inline: the
    operations are listed on the human's and the tester's docs page."""
    for listener, url in (
        ("human", console_server.human_url),
        ("tester", console_server.tester_url),
    ):
        page = open_console(listener, signed_in=False)
        page.goto(f"{url}/api/docs")
        expect(page.locator(".opblock").first).to_be_visible()
        expect(
            page.locator(".opblock-summary-path", has_text="/api/chat/threads").first
        ).to_be_visible()


def test_admin_pages_work_under_the_policy(
    open_console: OpenConsole, console_server: LiveServer, tester_api: LiveApi
) -> None:
    """Admin's sign-in, index, a list, a thread's page (its messages inline, the broker's own
    inline style with its nonce), the reply usage, and a user's page with its widgets."""
    thread = tester_api.create_thread(tester_api.create_project(unique("csp")), unique("admin"))
    tester_api.send(thread, unique("a turn"))
    page = open_console("human", signed_in=False)
    sign_in_admin(page, console_server.human_url)
    admin = f"{console_server.human_url}/admin"
    page.goto(f"{admin}/broker/thread/")
    expect(page.locator("#result_list")).to_be_visible()
    page.goto(f"{admin}/broker/thread/{thread}/change/")
    # The broker's style applies: a thread's inlines scroll inside their own box.
    expect(page.locator(".inline-scroll").first).to_have_css("overflow-x", "auto")
    page.goto(f"{admin}/broker/instance/usage/")
    expect(page.locator("#usage")).to_be_visible()
    page.goto(f"{admin}/auth/user/")
    page.get_by_role("link", name="staff", exact=True).click()
    expect(page.locator("#user_form")).to_be_visible()
    # Admin's scripts run: the permissions' two-box chooser is built by them.
    expect(page.locator("#id_user_permissions_filter")).to_be_visible()


def test_console_socket_connects_under_the_policy(open_console: OpenConsole) -> None:
    """`connect-src 'self'` lets the Console open its own listener's WebSocket: the thread is
    live, with no violation."""
    for listener in ("human", "tester"):
        page = open_console(listener)
        create_project(page, unique("csp"))
        create_thread(page, unique("socket"))
