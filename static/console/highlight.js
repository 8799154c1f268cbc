// Syntax highlighting of a reply's code blocks by highlight.js (its core and the few languages
// below, vendored). Its answer is a string — the code escaped, in <span class="hljs-…"> — so it
// goes through a DOMPurify of its own that keeps only those spans and hands back nodes; if the
// text that comes back is not the code as written, the block stays plain.

import hljs from "./vendor/highlight/core.min.js";
import bash from "./vendor/highlight/languages/bash.min.js";
import c from "./vendor/highlight/languages/c.min.js";
import cpp from "./vendor/highlight/languages/cpp.min.js";
import css from "./vendor/highlight/languages/css.min.js";
import diff from "./vendor/highlight/languages/diff.min.js";
import go from "./vendor/highlight/languages/go.min.js";
import java from "./vendor/highlight/languages/java.min.js";
import javascript from "./vendor/highlight/languages/javascript.min.js";
import json from "./vendor/highlight/languages/json.min.js";
import markdown from "./vendor/highlight/languages/markdown.min.js";
import plaintext from "./vendor/highlight/languages/plaintext.min.js";
import python from "./vendor/highlight/languages/python.min.js";
import rust from "./vendor/highlight/languages/rust.min.js";
import shell from "./vendor/highlight/languages/shell.min.js";
import sql from "./vendor/highlight/languages/sql.min.js";
import typescript from "./vendor/highlight/languages/typescript.min.js";
import xml from "./vendor/highlight/languages/xml.min.js";
import yaml from "./vendor/highlight/languages/yaml.min.js";
import DOMPurify from "./vendor/purify.es.js";

const LANGUAGES = {
  bash, c, cpp, css, diff, go, java, javascript, json, markdown, plaintext, python, rust, shell,
  sql, typescript, xml, yaml,
};
// Each grammar brings its aliases too: `js`, `py`, `sh`, `ts`, `html`, `yml`, `console` …
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);

// highlight.js names a token by a scope (`hljs-keyword`) and sub-scopes (`function_`): classes
// of any other shape are dropped, so nothing in a block can borrow one of the page's own.
const TOKEN_CLASS = /^(?:hljs-[a-z-]+|[a-z]+_+)$/;

const purifier = DOMPurify(window);
purifier.addHook("uponSanitizeAttribute", (node, data) => {
  if (data.attrName !== "class") return;
  data.attrValue = data.attrValue.split(/\s+/).filter((name) => TOKEN_CLASS.test(name)).join(" ");
});

// A fence's language as written (`js`, `Python`), or "" for none or one too odd to be a name.
export function languageOf(code) {
  const named = /(?:^|\s)language-([\w#+.-]{1,40})(?:\s|$)/.exec(code.className);
  return named ? named[1].toLowerCase() : "";
}

// Colours `code` (a <code> of text only) in place when its language is one of ours.
export function highlight(code, language) {
  if (!language || !hljs.getLanguage(language)) return;
  const text = code.textContent;
  let html;
  try {
    html = hljs.highlight(text, { language, ignoreIllegals: true }).value;
  } catch {
    return;
  }
  const fragment = purifier.sanitize(html, {
    ALLOWED_TAGS: ["span"],
    ALLOWED_ATTR: ["class"],
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
  if (fragment.textContent !== text) return;
  code.replaceChildren(fragment);
  code.classList.add("hljs");
}
