// The hostile-name corpus: file names and failure details that are markup, quotes, entities,
// URLs, paths, format strings, control and invisible characters. Every one is a name a queue
// must take (it ends in .json, is not hidden, has no slash and fits in 255 bytes) and must keep
// as it is, and that a page, a CSV or a log must show as text. Each script in it sets
// window.__pwned, so a browser test can tell whether any of it ran.

/** File names, each a message name consume takes. */
export const hostileNames: readonly string[] = [
  // Markup: a tag, an element with a handler, attribute breakers in both quotes.
  "<script>alert(1).json",
  "<img src=x onerror=window.__pwned=1>.json",
  `"><img src=x onerror=window.__pwned=2>.json`,
  `'onmouseover='alert(3)'.json`,
  `" autofocus onfocus="window.__pwned=4" x=".json`,
  "<b>bold.json",
  "<!--comment--><svg onload=window.__pwned=5>.json",
  "<table><tr><td><iframe srcdoc=x>.json",
  // Entities, which must reach the page as written, not as what they encode.
  "&lt;b&gt;entity.json",
  "&amp;&#60;script&#62;&quot;.json",
  // URLs and paths, which must not become links or be resolved.
  "javascript:window.__pwned=6.json",
  "https:evil.example@login.json",
  "x..\\..\\etc\\passwd.json",
  "C:\\Windows\\system32.json",
  "~root.json",
  "%2e%2e%2fetc%2fpasswd.json",
  // Percent signs and format strings.
  "100%.json",
  "%s%n%x%d.json",
  // A template literal's placeholder and a template engine's expression, as text.
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the placeholder is the hostile part
  "${window.__pwned=7}{{constructor.constructor('window.__pwned=8')()}}.json",
  // Line breaks and tabs inside a name.
  "new\nline<i>.json",
  "carriage\rreturn.json",
  "tab\there.json",
  // Invisible and reordering characters: a right-to-left override, zero-width ones, a BOM.
  "invoice\u202Egnp.json",
  "zero\u200Bwidth\u200Djoin.json",
  "\uFEFFbom.json",
  // As long as a name may be (254 bytes), all markup.
  `${"<i>".repeat(83)}.json`,
]

/** Failure details, as a handler's error message or a transient error's: each must reach a page as text. */
export const hostileDetails: readonly string[] = [
  "<script>window.__pwned=11</script>",
  `"><img src=x onerror=window.__pwned=12>`,
  "</pre><b>bold</b><pre>",
  "&lt;not a tag&gt; &amp; &#x3C;",
  "javascript:window.__pwned=13",
  "two\nlines <a href=javascript:window.__pwned=14>click</a>",
]
