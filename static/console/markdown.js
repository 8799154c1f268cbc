// Replies rendered as a safe markdown subset: markdown-it parses (raw HTML off, no images),
// DOMPurify keeps only the tags and attributes below and hands back nodes, never a string the
// page would set as HTML. Links open in a new tab without the opener; code blocks get a copy
// button. Anything outside the subset shows as text or not at all.

import markdownit from "./vendor/markdown-it.esm.min.js";
import DOMPurify from "./vendor/purify.es.js";
import { button, element } from "./page.js";

const markdown = markdownit({ html: false, linkify: true, breaks: true, typographer: false });
// No images: a picture in a reply would be a request to anywhere the reply names (a beacon).
markdown.disable("image");

const ALLOWED_TAGS = [
  "p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "hr",
  "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
  "table", "thead", "tbody", "tr", "th", "td",
];
const ALLOWED_ATTR = ["href", "title", "start"];
// Web and mail links only: no `javascript:`, `data:` or other schemes, no relative paths into
// the Console's own API.
const SAFE_LINK = /^(?:https?:|mailto:)/i;

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href") ?? "";
  if (!SAFE_LINK.test(href)) node.removeAttribute("href");
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
});

function copyButton(code) {
  const copy = button("Copy", "copy", "Copy code");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(code.textContent);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Copy failed";
    }
    setTimeout(() => { copy.textContent = "Copy"; }, 2000);
  });
  return copy;
}

// The rendered body of `text`: a <div> of sanitised nodes.
export function rendered(text) {
  const fragment = purifier.sanitize(markdown.render(text), {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP: SAFE_LINK,
    RETURN_DOM_FRAGMENT: true,
  });
  const body = element("div", "body markdown");
  body.dir = "auto";
  body.append(fragment);
  for (const pre of body.querySelectorAll("pre")) {
    const wrap = element("div", "code-block");
    pre.replaceWith(wrap);
    // A wide block scrolls by itself, and can be reached by keyboard to scroll it.
    pre.tabIndex = 0;
    wrap.append(copyButton(pre), pre);
  }
  for (const table of body.querySelectorAll("table")) {
    const wrap = element("div", "table-wrap");
    wrap.tabIndex = 0;
    table.replaceWith(wrap);
    wrap.append(table);
  }
  return body;
}

// The body as written, one text node: what a person typed, or a reply's raw markdown.
export function plain(text) {
  const body = element("p", "body plain", text);
  body.dir = "auto";
  return body;
}
