// The --html viewer's stylesheet and script, inlined into every page (no network access). The
// script renders the JSON data that tools/html_report.cpp embeds (<script id="tsfuse-data">).
//
// Behaviour: a summary at the top; per method a side-by-side table (before | after) whose runs
// of unchanged rows fold away; each fusion has its own color; clicking a replaced node, a fused
// op or a fusion's row in the summary selects that fusion (both sides light up, class "sel");
// rejected candidates are listed with their reasons and light up their nodes when clicked; a
// search box marks matching rows (class "hit") and unfolds them. The URL fragment
// #select=F1 (a fusion) or #node=%x.1 (any node id) selects on load, for links and tests.
#include "tools/html_report.h"

namespace tsfuse::tool {

const char* const kViewerCss = R"CSS(
:root { font-family: system-ui, sans-serif; font-size: 14px; color: #1b1f24; }
body { margin: 0; background: #f6f7f9; }
header { position: sticky; top: 0; z-index: 2; background: #24292f; color: #fff; padding: 8px 16px;
  display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
header h1 { font-size: 16px; margin: 0; font-weight: 600; }
header .tool { opacity: .7; font-size: 12px; }
#search { padding: 4px 8px; width: 260px; border-radius: 4px; border: 1px solid #888; }
#hits { font-size: 12px; opacity: .8; }
.legend span { display: inline-block; padding: 1px 6px; margin-left: 4px; border-radius: 3px; font-size: 12px; color: #1b1f24; }
main { padding: 12px 16px; }
section { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; margin-bottom: 16px; padding: 8px 12px; }
h2 { font-size: 15px; margin: 4px 0 8px; }
table.sum { border-collapse: collapse; margin: 4px 16px 8px 0; display: inline-table; vertical-align: top; }
table.sum th, table.sum td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; font-size: 13px; }
table.sum th { background: #f0f2f4; }
table.sum tr.fusion { cursor: pointer; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; background: var(--fc); vertical-align: middle; margin-right: 4px; }
code, .txt, .code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
table.graph { width: 100%; border-collapse: collapse; table-layout: fixed; }
table.graph th { text-align: left; background: #f0f2f4; padding: 4px 6px; font-size: 13px; }
table.graph td { vertical-align: top; padding: 1px 6px; border-bottom: 1px solid #f0f0f0; overflow: hidden; }
td.cell .txt { white-space: pre-wrap; word-break: break-all; }
td.cell .src { float: right; color: #57606a; font-size: 11px; margin-left: 8px; }
td.cell .code { display: block; color: #57606a; white-space: pre; overflow: hidden; text-overflow: ellipsis; }
td.role-replaced, td.role-fused, td.role-part { background: var(--bg); border-left: 4px solid var(--fc); cursor: pointer; }
td.role-replaced .txt { text-decoration: line-through; text-decoration-color: #cf222e80; }
td.role-fused { font-weight: 600; }
td.role-removed { background: #ffebe9; }
td.role-removed.dead-of { background: repeating-linear-gradient(45deg, var(--bg), var(--bg) 6px, #fff 6px, #fff 12px); border-left: 4px dotted var(--fc); }
td.role-added { background: #dafbe1; }
td.sel { outline: 2px solid var(--fc); outline-offset: -2px; background: var(--bg); filter: saturate(1.8); }
body[data-selected] td.cell:not(.sel):not(.empty) { opacity: .55; }
td.rej-sel { outline: 2px dashed #bf8700; outline-offset: -2px; background: #fff8c5; }
td.hit { box-shadow: inset 0 0 0 100px rgba(9, 105, 218, .15); }
a.link { font-size: 11px; margin-left: 6px; color: var(--fc); font-weight: 600; text-decoration: none; filter: brightness(.7); }
a.link:hover { text-decoration: underline; }
.badge { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 8px; background: var(--fc); color: #fff; margin-left: 6px; font-weight: 600; }
.rejbadge { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 8px; background: #bf8700; color: #fff; margin-left: 6px; }
ul.origins { margin: 2px 0 4px 0; padding-left: 18px; font-weight: normal; }
ul.origins li { font-size: 12px; }
tr.fold td { text-align: center; color: #57606a; background: #f6f8fa; cursor: pointer; font-size: 12px; }
tr.hidden { display: none; }
ul.rejections li { margin: 2px 0; cursor: pointer; }
ul.rejections li .reason { color: #9a6700; }
.muted { color: #57606a; }
)CSS";

const char* const kViewerJs = R"JS(
"use strict";
const data = JSON.parse(document.getElementById("tsfuse-data").textContent);
const CONTEXT = 2;  // unchanged rows kept around changes before a run folds
const app = document.getElementById("app");
const fusionColor = {};
let fusionIndex = 0;
for (const m of data.methods) for (const f of m.fusions) {
  const hue = Math.round((fusionIndex++ * 137.508 + 200) % 360);
  fusionColor[f.id] = { fc: `hsl(${hue} 70% 40%)`, bg: `hsl(${hue} 85% 92%)` };
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v; else if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}
function paint(e, fid) {
  if (!fid || !fusionColor[fid]) return e;
  e.style.setProperty("--fc", fusionColor[fid].fc);
  e.style.setProperty("--bg", fusionColor[fid].bg);
  return e;
}
const cellId = (mi, side, row) => `m${mi}-${side}-${row}`;

function header() {
  const search = el("input", { id: "search", type: "search", placeholder: "search nodes, ops, source lines\u2026" });
  search.addEventListener("input", () => runSearch(search.value));
  const legend = el("span", { class: "legend" }, "legend:",
    el("span", { style: "background:#dbeafe;border-left:4px solid #2563eb" }, "replaced by a fused op"),
    el("span", { style: "background:#dbeafe;font-weight:600" }, "fused op"),
    el("span", { style: "background:#ffebe9" }, "removed"), el("span", { style: "background:#dafbe1" }, "added"),
    el("span", { style: "background:#fff8c5" }, "rejected candidate"));
  const out = data.output ? ` \u2192 ${data.output}` + (data.output_written ? "" : " (not written)") : " (dry run)";
  return el("header", {}, el("h1", {}, `optimize-ts: ${data.input}${out}`), el("span", { class: "tool" }, data.tool), search,
    el("span", { id: "hits" }), legend);
}

function summary() {
  const methods = el("table", { class: "sum", id: "summary-methods" },
    el("tr", {}, el("th", {}, "method"), el("th", {}, "nodes before \u2192 after"), el("th", {}, "fused ops"),
      el("th", {}, "rejected candidates")));
  data.methods.forEach((m, mi) => methods.append(el("tr", {},
    el("td", {}, el("a", { href: `#method-${mi}` }, m.name)), el("td", {}, `${m.nodes_before} \u2192 ${m.nodes_after}`),
    el("td", {}, String(m.fusions.length)), el("td", {}, String(m.rejections.length)))));
  const passes = el("table", { class: "sum", id: "summary-passes" },
    el("tr", {}, el("th", {}, "pass"), el("th", {}, "candidates"), el("th", {}, "rewrites"), el("th", {}, "rejections")));
  for (const p of data.passes) passes.append(el("tr", {}, el("td", {}, p.name), el("td", {}, String(p.candidates)),
    el("td", {}, String(p.rewrites)), el("td", {}, String(p.rejections))));
  const fusions = el("table", { class: "sum", id: "summary-fusions" },
    el("tr", {}, el("th", {}, "fusion"), el("th", {}, "method"), el("th", {}, "became"), el("th", {}, "from"),
      el("th", {}, "source lines"), el("th", {}, "expression")));
  data.methods.forEach((m, mi) => m.fusions.forEach(f => {
    const tr = paint(el("tr", { class: "fusion", "data-fusion": f.id },
      el("td", {}, el("span", { class: "swatch" }), f.id), el("td", {}, m.name), el("td", {}, el("code", {}, f.op)),
      el("td", {}, `${f.nodes.length} nodes`), el("td", {}, f.lines), el("td", {}, el("code", {}, f.expr))), f.id);
    tr.addEventListener("click", () => select(f.id, true));
    fusions.append(tr);
  }));
  if (fusions.rows.length === 1) fusions.append(el("tr", {}, el("td", { colspan: 6 }, "nothing was fused")));
  return el("section", { id: "summary" }, el("h2", {}, "Summary"), methods, passes, fusions);
}

function cell(m, mi, side, idx) {
  if (idx === null) return el("td", { class: "cell empty" });
  const r = (side === "b" ? m.before : m.after)[idx];
  const td = el("td", { id: cellId(mi, side, idx), class: `cell role-${r.role}`, "data-node": r.id,
    "data-fusion": r.fu, title: r.src ? `${r.src.file}:${r.src.line}\n${r.src.code.trim()}` : null });
  td.style.paddingLeft = `${6 + 12 * r.d}px`;
  if (r.src) td.append(el("span", { class: "src" }, r.src.short));
  td.append(el("span", { class: "txt" }, r.t));
  if (r.fu) {
    paint(td, r.fu);
    const f = m.fusions.find(x => x.id === r.fu);
    if (r.role === "replaced" && f && f.row !== null)
      td.append(el("a", { class: "link to-fused", href: `#${cellId(mi, "a", f.row)}` }, `\u2192 ${f.id} ${f.op}`));
    if (r.role === "removed") { td.classList.add("dead-of"); td.append(el("span", { class: "badge" }, `dead after ${r.fu}`)); }
    if (r.role === "part") td.append(el("span", { class: "badge" }, `${r.fu} operands`));
    if (r.role === "fused" && f) {
      td.append(el("span", { class: "badge" }, `${f.id} \u2190 ${f.nodes.length} nodes`));
      const ul = el("ul", { class: "origins" });
      for (const n of f.nodes) {
        const src = n.row !== null && m.before[n.row].src;
        ul.append(el("li", {}, n.row === null ? n.desc :
          el("a", { class: "link to-orig", href: `#${cellId(mi, "b", n.row)}` }, `${n.id} ${m.before[n.row].k}`),
          src ? el("span", { class: "muted" }, ` ${src.short}  `) : null, src ? el("code", {}, src.code.trim()) : null));
      }
      td.append(ul);
    }
  }
  if (r.role === "replaced" && r.src) td.append(el("span", { class: "code" }, r.src.code.trim()));
  (side === "b" ? m.rejections : []).forEach((rj, ri) => {
    if (rj.nodes.some(n => n.row === idx))
      td.append(el("span", { class: "rejbadge", title: rj.reason, "data-rejection": `${mi}-${ri}` }, `rejected R${ri + 1}`));
  });
  return td;
}

function methodSection(m, mi) {
  const sec = el("section", { class: "method", id: `method-${mi}`, "data-method": m.name });
  const what = m.fusions.length ? m.fusions.map(f => `${f.id}: ${f.nodes.length} nodes \u2192 ${f.op}`).join("; ")
                                : (m.changed ? "changed" : "unchanged");
  sec.append(el("h2", {}, `${m.name} \u2014 ${what}`));
  if (m.rejections.length) {
    const ul = el("ul", { class: "rejections" });
    m.rejections.forEach((rj, ri) => {
      const li = el("li", { "data-rejection": `${mi}-${ri}` }, el("b", {}, `R${ri + 1} `), `${rj.pass}: `,
        el("span", { class: "reason" }, rj.reason), el("span", { class: "muted" }, ` \u2014 ${rj.nodes.length} node(s)` +
        (rj.lines ? ` at ${rj.lines}` : "")), ...rj.nodes.filter(n => n.row !== null).map(n =>
          el("a", { class: "link", href: `#${cellId(mi, "b", n.row)}`, style: "--fc:#9a6700" }, n.id)));
      li.addEventListener("click", () => selectRejection(mi, ri));
      ul.append(li);
    });
    sec.append(el("div", {}, el("b", {}, "Rejected candidates"), ul));
  }
  const table = el("table", { class: "graph" }, el("colgroup", {}, el("col", { style: "width:50%" }), el("col", { style: "width:50%" })),
    el("tr", {}, el("th", {}, "before fusion (after inline)"), el("th", {}, "after")));
  const rows = m.rows.map(([b, a, same]) => ({ tr: el("tr", {}, cell(m, mi, "b", b), cell(m, mi, "a", a)), same }));
  for (let i = 0; i < rows.length;) {  // fold runs of unchanged rows, keeping CONTEXT rows at each end
    let j = i;
    while (j < rows.length && rows[j].same) j++;
    const lo = i === 0 ? i : i + CONTEXT, hi = j === rows.length ? j : j - CONTEXT;
    for (let k = i; k < j; k++) table.append(rows[k].tr);
    if (hi - lo > 1) {
      const hidden = rows.slice(lo, hi).map(r => r.tr);
      hidden.forEach(tr => tr.classList.add("hidden"));
      const fold = el("tr", { class: "fold" }, el("td", { colspan: 2 }, `\u22ef ${hidden.length} unchanged rows (click to show)`));
      fold.addEventListener("click", () => { hidden.forEach(tr => tr.classList.remove("hidden")); fold.remove(); });
      hidden[0].before(fold);
    }
    i = j;
    while (i < rows.length && !rows[i].same) table.append(rows[i++].tr);
  }
  sec.append(table);
  return sec;
}

function reveal(e) {
  const tr = e.closest("tr");
  if (tr && tr.classList.contains("hidden")) {
    let p = tr.previousElementSibling;
    while (p && !p.classList.contains("fold")) p = p.previousElementSibling;
    if (p) p.click();
  }
}
function clearSelection() {
  document.querySelectorAll(".sel, .rej-sel").forEach(e => e.classList.remove("sel", "rej-sel"));
  delete document.body.dataset.selected;
}
function select(fid, scroll, from) {
  clearSelection();
  const cells = [...document.querySelectorAll(`[data-fusion="${fid}"]`)];
  cells.forEach(e => { e.classList.add("sel"); reveal(e); });
  document.body.dataset.selected = fid;
  if (!scroll) return;
  const side = from && from.id.includes("-a-") ? "-b-" : "-a-";  // show the other side
  const target = cells.find(e => e.id && e.id.includes(side) && e.classList.contains(side === "-a-" ? "role-fused" : "role-replaced"));
  if (target) target.scrollIntoView({ block: "center" });
}
function selectRejection(mi, ri) {
  clearSelection();
  const rj = data.methods[mi].rejections[ri];
  for (const n of rj.nodes) if (n.row !== null) {
    const e = document.getElementById(cellId(mi, "b", n.row));
    if (e) { e.classList.add("rej-sel"); reveal(e); }
  }
  document.body.dataset.selected = `R${mi}-${ri}`;
}
function runSearch(q) {
  document.querySelectorAll(".hit").forEach(e => e.classList.remove("hit"));
  const hits = document.getElementById("hits");
  q = q.trim().toLowerCase();
  if (!q) { hits.textContent = ""; return; }
  let n = 0;
  for (const td of document.querySelectorAll("td.cell:not(.empty)")) {
    if (td.textContent.toLowerCase().includes(q) || (td.title || "").toLowerCase().includes(q)) {
      td.classList.add("hit"); reveal(td); n++;
    }
  }
  hits.textContent = `${n} match${n === 1 ? "" : "es"}`;
}
function fromHash(ev) {
  const h = decodeURIComponent(location.hash.slice(1)), scroll = !!ev;  // on load: stay at the top
  if (h.startsWith("select=")) return select(h.slice(7), scroll);
  if (h.startsWith("node=")) {
    const e = document.querySelector(`td[data-node="${CSS.escape(h.slice(5))}"][data-fusion]`);
    if (e) select(e.dataset.fusion, scroll, e);
    return;
  }
  if (h.startsWith("search=")) { document.getElementById("search").value = h.slice(7); return runSearch(h.slice(7)); }
}

app.textContent = "";
document.body.prepend(header());
app.append(el("main", {}, summary(), ...data.methods.map(methodSection)));
app.addEventListener("click", ev => {
  const a = ev.target.closest("a.link");
  const td = ev.target.closest("td.cell[data-fusion]");
  if (a) {
    const target = document.getElementById(a.getAttribute("href").slice(1));
    if (target && target.dataset.fusion) { ev.preventDefault(); select(target.dataset.fusion, false); reveal(target);
      target.scrollIntoView({ block: "center" }); }
    else if (target) { reveal(target); }
    return;
  }
  if (td) select(td.dataset.fusion, true, td);
});
window.addEventListener("hashchange", fromHash);
fromHash();
document.body.dataset.ready = "1";
)JS";

}  // namespace tsfuse::tool
