// Replies rendered as a safe markdown subset: markdown-it parses (raw HTML off), DOMPurify keeps
// only the tags and attributes below and hands back nodes, never a string the page would set as
// HTML. Links open in a new tab without the opener; an image is shown as a link to it, never
// loaded; `- [ ]` and `- [x]` items show read-only checkboxes; code blocks are highlighted and
// have a bar with their language and a copy button; tables scroll sideways. Anything outside the
// subset shows as text or not at all.

import { highlight, languageOf } from "./highlight.js";
import markdownit from "./vendor/markdown-it.esm.min.js";
import DOMPurify from "./vendor/purify.es.js";
import { button, element } from "./page.js";

const markdown = markdownit({ html: false, linkify: true, breaks: true, typographer: false });
const { escapeHtml } = markdown.utils;

// An image would be a request to anywhere the reply names (a beacon): it is drawn as a link to
// it instead, named by its alt text (or its address when it has none). Inside a link it is just
// that text, so the outer link stays one link.
function insideLink(tokens, idx) {
  let depth = 0;
  for (const token of tokens.slice(0, idx)) {
    if (token.type === "link_open") depth += 1;
    else if (token.type === "link_close") depth -= 1;
  }
  return depth > 0;
}

markdown.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = token.attrGet("src") ?? "";
  const text = escapeHtml(self.renderInlineAsText(token.children, options, env) || src);
  if (insideLink(tokens, idx)) return text;
  return `<a href="${escapeHtml(src)}">${text}</a>`;
};

// Task lists as GitHub writes them: a list item whose text starts with `[ ] ` or `[x] ` starts
// with a checkbox instead, disabled (a reply is not a form). `\[ ]` stays text.
const TASK = /^\[([ xX])\][ \t]/;

markdown.core.ruler.after("inline", "task_lists", (state) => {
  const { tokens } = state;
  for (let i = 2; i < tokens.length; i += 1) {
    const inline = tokens[i];
    if (inline.type !== "inline" || tokens[i - 2].type !== "list_item_open") continue;
    const first = inline.children[0];
    const task = first?.type === "text" ? TASK.exec(first.content) : null;
    if (!task) continue;
    first.content = first.content.slice(task[0].length);
    const box = new state.Token("task_checkbox", "input", 0);
    box.meta = { checked: task[1] !== " " };
    inline.children.unshift(box);
  }
});

// A table column's alignment: markdown-it writes `style="text-align:…"` on its cells, which the
// Content-Security-Policy refuses (no inline style, docs/security.md) as soon as the HTML is
// parsed. The cells get a class instead (`align-left`, `align-center`, `align-right`,
// markdown.css), and no `style` is ever written.
const ALIGNED = /^text-align:(left|center|right)$/;

markdown.core.ruler.push("table_alignment", (state) => {
  for (const token of state.tokens) {
    if (token.type !== "th_open" && token.type !== "td_open") continue;
    const align = ALIGNED.exec(token.attrGet("style") ?? "");
    token.attrs = (token.attrs ?? []).filter(([name]) => name !== "style");
    if (align) token.attrJoin("class", `align-${align[1]}`);
  }
});

markdown.renderer.rules.task_checkbox = (tokens, idx) =>
  `<input type="checkbox" disabled${tokens[idx].meta.checked ? " checked" : ""}>`;

const ALLOWED_TAGS = [
  "p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "hr",
  "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
  "table", "thead", "tbody", "tr", "th", "td", "input",
];
const ALLOWED_ATTR = ["href", "title", "start", "class", "type", "checked", "disabled"];
// Attributes whose value is not an address: without this, DOMPurify holds `start="3"` and
// `type="checkbox"` to SAFE_LINK and drops them.
const NOT_ADDRESSES = ["start", "type"];
// Web and mail links only: no `javascript:`, `data:` or other schemes, no relative paths into
// the Console's own API.
const SAFE_LINK = /^(?:https?:|mailto:)/i;
// The classes kept: a fenced block's language (`language-js`), which names its highlighting, and
// a table cell's alignment (`align-center`).
const LANGUAGE_CLASS = /^language-[\w#+.-]{1,40}$/;
const ALIGN_CLASS = /^align-(?:left|center|right)$/;
// What an <input> may carry: a read-only checkbox and nothing else.
const INPUT_ATTR = new Set(["type", "checked", "disabled"]);

const purifier = DOMPurify(window);
purifier.addHook("uponSanitizeAttribute", (node, data) => {
  // `class` only as a code block's language or a cell's alignment; the checkbox's attributes
  // only on an <input>.
  if (data.attrName === "class") {
    data.keepAttr = (node.tagName === "CODE" && LANGUAGE_CLASS.test(data.attrValue))
      || (["TH", "TD"].includes(node.tagName) && ALIGN_CLASS.test(data.attrValue));
  } else if (INPUT_ATTR.has(data.attrName)) {
    data.keepAttr = node.tagName === "INPUT";
  }
});
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "INPUT") {
    // Only the task list's checkbox, and never one that can be changed or sent.
    if (node.getAttribute("type") !== "checkbox") node.remove();
    else node.setAttribute("disabled", "");
    return;
  }
  if (node.tagName !== "A") return;
  const href = node.getAttribute("href") ?? "";
  if (!SAFE_LINK.test(href)) node.removeAttribute("href");
  node.setAttribute("target", "_blank");
  node.setAttribute("rel", "noopener noreferrer");
});

// A button that copies `textOf()` and says whether it did.
export function copyButton(textOf, label, className = "copy") {
  const copy = button("Copy", className, label);
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(textOf());
      copy.textContent = "Copied";
    } catch {
      copy.textContent = "Copy failed";
    }
    setTimeout(() => { copy.textContent = "Copy"; }, 2000);
  });
  return copy;
}

// A code block in a frame of its own: a bar with its language and Copy above the code, so the
// button never covers it.
function codeBlock(pre) {
  const code = pre.querySelector("code") ?? pre;
  const language = languageOf(code);
  highlight(code, language);
  const wrap = element("div", "code-block");
  const bar = element("div", "code-bar");
  const copy = copyButton(() => code.textContent, "Copy code");
  bar.append(element("span", "code-language", language || "text"), copy);
  pre.replaceWith(wrap);
  // A wide block scrolls by itself, and can be reached by keyboard to scroll it.
  pre.tabIndex = 0;
  wrap.append(bar, pre);
}

// A task's checkbox is named by the task's own text, so a screen reader says what is done.
function labelTask(box) {
  const item = box.closest("li");
  item?.classList.add("task");
  const text = [...box.parentNode.childNodes]
    .filter((node) => node !== box && !["UL", "OL"].includes(node.nodeName))
    .map((node) => node.textContent)
    .join("")
    .trim();
  box.setAttribute("aria-label", text || "task");
}

// The rendered body of `text`: a <div> of sanitised nodes.
export function rendered(text) {
  const fragment = purifier.sanitize(markdown.render(text), {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP: SAFE_LINK,
    ADD_URI_SAFE_ATTR: NOT_ADDRESSES,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
  const body = element("div", "body markdown");
  body.dir = "auto";
  body.append(fragment);
  for (const pre of body.querySelectorAll("pre")) codeBlock(pre);
  for (const box of body.querySelectorAll("input")) labelTask(box);
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
