// The HTTP API: JSON in and out, every refusal an ApiError with the server's code and sentence.

import { cookie, listener, newKey, sleep } from "./page.js";

const BACKOFF_FIRST_MS = 500;
const RETRY_ATTEMPTS = 3;

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

// Told of an answer that says the session is gone (set by the connection module).
let onSignedOut = () => {};
export function whenSignedOut(callback) {
  onSignedOut = callback;
}

export const isSignedOutAnswer = (error) => error.status === 401 || error.code === "not-authenticated";

export async function request(method, path, body, key) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (method !== "GET") {
    // Origin and Sec-Fetch-Site are the browser's own; the CSRF token is the human's (L2).
    headers["Content-Type"] = "application/json";
    // The channel the trail labels a send by ("via Console").
    headers["X-Mosaic-Via"] = "console";
    if (listener === "human") headers["X-CSRFToken"] = cookie("csrftoken");
    if (key) headers["Idempotency-Key"] = key;
    init.body = JSON.stringify(body ?? {});
  }
  let answer;
  try {
    answer = await fetch(path, init);
  } catch {
    throw new ApiError(0, "unavailable", "The server did not answer. Check the connection and try again.");
  }
  const data = await answer.json().catch(() => ({}));
  if (answer.ok) return data;
  const error = new ApiError(answer.status, data.error ?? "error", data.detail ?? `The server answered ${answer.status}.`);
  if (isSignedOutAnswer(error)) onSignedOut();
  throw error;
}

export const get = (path) => request("GET", path);

// Every write carries an Idempotency-Key (R21). A write that got no answer is retried with
// the same key and body, so the server stores it once however often it arrives.
export async function write(path, body, key = newKey(), method = "POST") {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await request(method, path, body, key);
    } catch (error) {
      const retriable = error.status === 0 || error.code === "unavailable";
      if (!retriable || attempt >= RETRY_ATTEMPTS) throw error;
      await sleep(BACKOFF_FIRST_MS * 2 ** attempt);
    }
  }
}

export function query(path, params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `${path}?${text}` : path;
}
