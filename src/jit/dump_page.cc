// The HTML pages of the jit's IR dumps (see dump_page.h).
#include "jit/dump_page.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <utility>

namespace kiln::jit_detail {

namespace {

// A JSON string. '<', '>' and '&' are escaped too, so the JSON can sit inside a <script> element
// whatever the graph's text holds ("</script>" in a graph name stays data).
void append_json(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == '<' || c == '>' || c == '&') {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// HTML text (element content and attribute values).
void append_html(std::string& out, std::string_view s) {
  for (const char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
}

void append_number(std::string& out, double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  out += text;
}

// Writes one JSON object's members, placing the commas: `JsonObject o(out); o.string("a", x);`.
// The object's braces are the caller's (open() and close() write them).
class JsonObject {
 public:
  explicit JsonObject(std::string& out) : out_(out) {}
  void open() { out_ += '{'; }
  void close() { out_ += '}'; }
  /// Writes `"key":` (after a comma from the second member on); the value is the caller's.
  std::string& key(const char* name) {
    if (members_++) out_ += ',';
    out_ += '"';
    out_ += name;
    out_ += "\":";
    return out_;
  }
  void string(const char* name, std::string_view v) { append_json(key(name), v); }
  void boolean(const char* name, bool v) { key(name) += v ? "true" : "false"; }
  void number(const char* name, double v) { append_number(key(name), v); }

 private:
  std::string& out_;
  int members_ = 0;
};

void append_files(std::string& out, const DumpGraphFiles& f) {
  JsonObject o(out);
  o.open();
  o.string("kir", f.kir);
  o.string("dot", f.dot);
  o.string("svg", f.svg);
  o.string("svgNote", f.svg_note);
  o.string("text", f.text);
  o.boolean("textCut", f.text_cut);
  o.close();
}

// Node ids as strings: the return node's id (2^64 - 1) is past JavaScript's exact integers, so it
// is written "ret", as the IR text's `return` line is matched on the page.
void append_ids(std::string& out, const ir::NodeIdSet& ids) {
  std::vector<uint64_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  out += '[';
  for (size_t i = 0; i < sorted.size(); ++i) {
    out += i ? "," : "";
    append_json(out, sorted[i] == Node::kReturnId ? "ret" : std::to_string(sorted[i]));
  }
  out += ']';
}

void append_step(std::string& out, const DumpStep& s) {
  JsonObject o(out);
  o.open();
  o.string("title", s.title);
  o.boolean("pass", s.is_pass);
  o.string("stage", s.stage);
  o.string("name", s.pass);
  o.boolean("changed", s.changed);
  o.number("matches", static_cast<double>(s.matches));
  o.number("refusals", static_cast<double>(s.refusals));
  std::string& reasons = o.key("reasons");
  reasons += '[';
  for (size_t i = 0; i < s.reasons.size(); ++i) {
    reasons += i ? "," : "";
    append_json(reasons, s.reasons[i]);
  }
  reasons += ']';
  o.number("ms", s.seconds * 1e3);
  o.string("note", s.note);
  o.boolean("shown", s.has_graphs);
  if (s.has_graphs) {
    if (s.is_pass) append_files(o.key("before"), s.before);
    append_files(o.key("after"), s.after);
    append_ids(o.key("highlight"), s.highlight);
  }
  o.close();
}

constexpr std::string_view kStyle = R"CSS(
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: #222; }
  header { display: flex; gap: .75em; align-items: center; padding: .5em 1em;
           border-bottom: 1px solid #ccc; background: #f6f6f6; position: sticky; top: 0; }
  header h1 { font-size: 1.1em; margin: 0 1em 0 0; }
  header .hint { color: #777; font-size: .9em; }
  #layout { display: grid; grid-template-columns: minmax(16em, 22em) 1fr; }
  nav { border-right: 1px solid #ddd; max-height: calc(100vh - 3em); overflow: auto;
        position: sticky; top: 3em; }
  #steps { margin: 0; padding: .5em; list-style: none; }  /* the counter numbers the shown steps */
  #steps li { padding: .25em .4em; cursor: pointer; border-radius: 4px; }
  #steps li .stage { color: #666; font-size: .85em; margin-left: .3em; }
  #steps li .meta { display: block; color: #666; font-size: .85em; }
  #steps li.unchanged { color: #999; cursor: default; }
  #steps li.current { background: #ffe082; }
  main { padding: .5em 1em; min-width: 0; }
  .head h2 { margin: .2em 0; font-size: 1.15em; }
  .meta { color: #555; }
  .note { color: #8a4b00; }
  .panes { display: flex; gap: 1em; align-items: flex-start; }
  .pane { flex: 1 1 0; min-width: 0; border: 1px solid #ddd; border-radius: 4px; padding: .5em; }
  .pane h3 { margin: 0 0 .3em; font-size: 1em; }
  .pane img { max-width: 100%; display: block; margin: auto; }
  pre.ir { font-size: 12px; overflow: auto; max-height: 30em; background: #fafafa; margin: 0; }
  pre.ir mark { background: #ffd54f; }
  .files a { margin-right: .8em; font-size: .9em; }
)CSS";

// Builds the view from the JSON in #kiln-data (see dump_page.h for what it shows).
constexpr std::string_view kScript = R"JS(
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('kiln-data').textContent);
  const steps = data.steps;
  const shown = [];
  steps.forEach((s, i) => { if (s.shown) shown.push(i); });
  const list = document.getElementById('steps');
  const view = document.getElementById('view');
  const counter = document.getElementById('counter');
  const prev = document.getElementById('prev');
  const next = document.getElementById('next');
  let current = -1;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function summary(s) {
    let t = s.matches + (s.matches === 1 ? ' match' : ' matches');
    if (s.refusals) t += ', ' + s.refusals + ' refused';
    return t + ', ' + s.ms.toFixed(3) + ' ms';
  }
  const items = steps.map((s, i) => {
    const li = el('li', s.shown ? 'step' : 'step unchanged');
    li.dataset.index = String(i);
    li.appendChild(el('span', 'name', s.pass ? s.name : s.title));
    if (s.pass) {
      li.appendChild(document.createTextNode(' '));  // lets a long pass name wrap before it
      li.appendChild(el('span', 'stage', s.stage));
      li.appendChild(el('span', 'meta', summary(s) + (s.shown ? '' : ', no change')));
    }
    if (s.shown) li.addEventListener('click', () => go(shown.indexOf(i)));
    list.appendChild(li);
    return li;
  });

  function irText(g, marked) {
    const pre = el('pre', 'ir');
    for (const line of g.text.split('\n')) {
      const m = /^\s*%(\d+)\s*=/.exec(line);
      const id = m ? m[1] : (/^\s*return\b/.test(line) ? 'ret' : null);
      pre.appendChild(el(id !== null && marked.has(id) ? 'mark' : 'span', null, line + '\n'));
    }
    return pre;
  }
  function pane(label, g, marked) {
    const div = el('div', 'pane');
    div.appendChild(el('h3', null, label));
    if (g.svg) {
      const link = el('a');
      link.href = g.svg;
      link.target = '_blank';
      const img = el('img', 'graph');
      img.alt = label + ' (' + g.svg + ')';
      img.addEventListener('load', () => { img.dataset.loaded = '1'; });
      img.addEventListener('error', () => { img.dataset.loaded = 'error'; });
      img.src = g.svg;
      link.appendChild(img);
      div.appendChild(link);
    } else {
      div.appendChild(el('p', 'note', g.svgNote || 'no SVG'));
    }
    const details = el('details', 'text');
    details.open = !g.svg;
    details.appendChild(el('summary', null,
                           'IR text' + (g.textCut ? ' (cut short: the .kir file has all)' : '')));
    details.appendChild(irText(g, marked));
    div.appendChild(details);
    const files = el('p', 'files', 'files: ');
    for (const f of [g.kir, g.dot, g.svg]) {
      if (!f) continue;
      const a = el('a', null, f.slice(f.lastIndexOf('.')));
      a.href = f;
      a.title = f;
      files.appendChild(a);
    }
    div.appendChild(files);
    return div;
  }

  function go(k) {
    if (shown.length === 0) return;
    k = Math.max(0, Math.min(shown.length - 1, k));
    current = k;
    const i = shown[k];
    const s = steps[i];
    const marked = new Set(s.highlight);
    items.forEach((li, j) => li.classList.toggle('current', j === i));
    items[i].scrollIntoView({block: 'nearest'});
    counter.textContent = 'step ' + (k + 1) + ' of ' + shown.length;
    prev.disabled = k === 0;
    next.disabled = k === shown.length - 1;
    view.replaceChildren();
    const head = el('div', 'head');
    head.appendChild(el('h2', null, s.pass ? s.stage + ' \u00b7 ' + s.name : s.title));
    if (s.pass) {
      head.appendChild(el('p', 'meta', summary(s) + '; ' + s.highlight.length +
                          ' nodes added, removed or changed (highlighted)'));
    }
    if (s.note) head.appendChild(el('p', 'note', s.note));
    if (s.reasons.length) {
      const ul = el('ul', 'reasons');
      for (const r of s.reasons) ul.appendChild(el('li', null, r));
      head.appendChild(ul);
    }
    view.appendChild(head);
    const panes = el('div', 'panes');
    if (s.pass) {
      panes.appendChild(pane('before', s.before, marked));
      panes.appendChild(pane('after', s.after, marked));
    } else {
      panes.appendChild(pane(s.title, s.after, marked));
    }
    view.appendChild(panes);
    view.dataset.step = String(k + 1);
    if (location.hash !== '#' + (k + 1)) {
      try { history.replaceState(null, '', '#' + (k + 1)); } catch (e) { /* some file: URLs */ }
    }
  }

  prev.addEventListener('click', () => go(current - 1));
  next.addEventListener('click', () => go(current + 1));
  document.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const to = {ArrowLeft: current - 1, ArrowRight: current + 1, Home: 0,
                End: shown.length - 1}[e.key];
    if (to === undefined) return;
    e.preventDefault();
    go(to);
  });
  function fromHash() {
    const n = parseInt(location.hash.slice(1), 10);
    go(Number.isFinite(n) ? n - 1 : 0);
  }
  window.addEventListener('hashchange', fromHash);
  if (shown.length === 0) view.textContent = 'No graph was dumped.';
  fromHash();
})();
)JS";

void append_head(std::string& out, const std::string& title) {
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  append_html(out, title);
  out += "</title>\n<style>";
  out += kStyle;
  out += "</style>\n</head>\n";
}

// "<graph>.<digits>.html" -> the number; -1 when `name` is not a compilation page.
long long page_number(const std::string& name) {
  const std::string_view suffix = ".html";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(),
                                                   suffix) != 0) {
    return -1;
  }
  const std::string stem = name.substr(0, name.size() - suffix.size());
  const size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size() || dot == 0) return -1;
  long long n = 0;
  for (size_t i = dot + 1; i < stem.size(); ++i) {
    if (stem[i] < '0' || stem[i] > '9' || n > 1'000'000'000) return -1;
    n = n * 10 + (stem[i] - '0');
  }
  return n;
}

}  // namespace

std::string compilation_page(const std::string& stem, const std::string& graph,
                             const std::vector<DumpStep>& steps) {
  std::string out;
  append_head(out, "Kiln IR: " + stem);
  out += "<body>\n<header><h1>";
  append_html(out, graph);
  out += " <small>(";
  append_html(out, stem);
  out += ")</small></h1>\n<button id=\"prev\" title=\"previous step (left arrow)\">&#9664; prev"
         "</button><span id=\"counter\"></span><button id=\"next\" title=\"next step (right "
         "arrow)\">next &#9654;</button><span class=\"hint\">&larr; &rarr; keys</span>"
         "<a href=\"index.html\">all compilations</a></header>\n"
         "<div id=\"layout\"><nav><ol id=\"steps\"></ol></nav><main id=\"view\"></main></div>\n"
         "<script id=\"kiln-data\" type=\"application/json\">";
  JsonObject data(out);
  data.open();
  data.string("graph", graph);
  data.string("stem", stem);
  data.key("steps") += '[';
  for (size_t i = 0; i < steps.size(); ++i) {
    out += i ? ",\n" : "\n";
    append_step(out, steps[i]);
  }
  out += ']';
  data.close();
  out += "</script>\n<script>";
  out += kScript;
  out += "</script>\n</body>\n</html>\n";
  return out;
}

std::vector<std::string> list_pages(const std::string& dir) {
  std::vector<std::pair<long long, std::string>> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const long long n = page_number(name);
    if (n >= 0) found.emplace_back(n, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> pages;
  for (auto& [n, name] : found) pages.push_back(std::move(name));
  return pages;
}

std::string index_page(const std::vector<std::string>& pages) {
  std::string out;
  append_head(out, "Kiln IR dumps");
  out += "<body>\n<header><h1>Kiln IR dumps</h1><span class=\"hint\">one page per compilation"
         "</span></header>\n<main>\n<ol id=\"compilations\">\n";
  for (const std::string& page : pages) {
    out += "<li><a href=\"";
    append_html(out, page);
    out += "\">";
    append_html(out, page.substr(0, page.size() - 5));
    out += "</a></li>\n";
  }
  out += "</ol>\n</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace kiln::jit_detail
