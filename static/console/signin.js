// Sign-in for the human listener: POST /api/auth/login, then on to the Console at `/`.
// Login needs no CSRF token; the browser adds Origin and Sec-Fetch-Site itself (L2).

const form = document.getElementById("signin");
const error = document.getElementById("signin-error");
const submit = document.getElementById("signin-submit");

function showError(text) {
  error.textContent = text;
  error.hidden = false;
}

async function signIn(event) {
  event.preventDefault();
  const fields = new FormData(form);
  submit.disabled = true;
  error.hidden = true;
  try {
    const answer = await fetch("/api/auth/login", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ username: fields.get("username"), password: fields.get("password") }),
    });
    if (answer.ok) {
      // Back to the place the Console was asked for: `/` without a session sends its
      // address here, `#project=…&thread=…` and all.
      location.assign(`/${location.hash}`);
      return;
    }
    const data = await answer.json().catch(() => ({}));
    showError(data.detail ?? `The server answered ${answer.status}.`);
  } catch {
    showError("The server did not answer. Check the connection and try again.");
  } finally {
    submit.disabled = false;
  }
}

form.addEventListener("submit", signIn);
