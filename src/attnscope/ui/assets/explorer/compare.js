// Part 6: compare mode: A (the selection), B (another head, or the same head of another record), A − B.
Object.assign(Explorer.prototype, {
  buildCompare() {
    this.selB = null;
    this.barB = el("div", "bar");
    const columns = el("div", "columns two");
    const [left, right] = [el("div", "scroll"), el("div", "scroll")];
    this.titleA = el("div", "title");
    this.titleB = el("div", "title");
    left.append(this.titleA);
    right.append(this.titleB);
    this.mapA = new Cells(left, this.tip, "a");
    this.mapB = new Cells(right, this.tip, "b");
    columns.append(left, right);
    this.titleD = el("div", "title", "A − B");
    const below = el("div", "scroll");
    this.mapD = new Cells(below, this.tip, "difference");
    this.summary = el("div", "summary");
    this.root.append(this.barB, columns, this.titleD, below, this.summary);
  },

  pickB(change) {
    this.selB = { ...this.selB, ...change };
    this.render();
  },

  fitB() {  // B follows A's kind, layer and head unless two heads of one record are compared (then it is B's own)
    const c = this.w.h.compare, s = this.sel, kinds = this.wb.h.kinds;
    if (c.what !== "heads") {
      const info = kinds[s.kind];
      return { kind: s.kind, layer: Math.min(s.layer, info.n_layers - 1), head: s.head !== null && s.head < info.heads ? s.head : null };
    }
    const heads = kinds[s.kind].heads;
    const b = this.selB || { kind: s.kind, layer: s.layer, head: s.head === null ? 0 : heads > 1 ? (s.head + 1) % heads : null };
    const kind = KINDS.includes(b.kind) ? b.kind : s.kind, info = kinds[kind];
    this.selB = { kind, layer: Math.min(b.layer, info.n_layers - 1), head: b.head !== null && b.head < info.heads ? b.head : null };
    return this.selB;
  },

  describe(who, label, s) {
    return `${who} (${label}): ${KIND_LABELS[s.kind]} · layer ${s.layer} · ${s.head === null ? "mean of heads" : `head ${s.head}`}`;
  },

  renderCompare() {
    const h = this.w.h, c = h.compare, s = this.sel, b = this.fitB(), tb = c.b || h;
    if (c.what === "heads") {
      const info = this.wb.h.kinds[b.kind];
      this.barB.replaceChildren(
        this.buttons("B", KINDS.map((k) => [k, KIND_LABELS[k]]), b.kind, (kind) => this.pickB({ kind })),
        this.buttons("Layer", [...Array(info.n_layers).keys()].map((l) => [l, String(l)]), b.layer, (layer) => this.pickB({ layer })),
        this.buttons("Head", [["mean", "mean"], ...[...Array(info.heads).keys()].map((x) => [x, String(x)])],
          b.head === null ? "mean" : b.head, (head) => this.pickB({ head: head === "mean" ? null : head })));
    } else {
      this.barB.replaceChildren(el("span", "label", `B: the same kind, layer and head of ${c.b ? c.b.label : "B"}`));
    }
    const [qa, ka] = tokensOf(h, s.kind), [qb, kb] = tokensOf(tb, b.kind);
    const ma = this.w.map(s.kind, s.layer, s.head), mb = this.wb.map(b.kind, b.layer, b.head);
    const cell = (n) => this.fitCell(n, (this.room() - 360) / 2, 4, 30);
    const perHead = this.perHeadScale(), top = (m) => (perHead ? m.reduce((x, v) => (v > x ? v : x), 0) : 1);
    const [topA, topB] = [top(ma), top(mb)];
    this.titleA.textContent = this.describe("A", c.a, s);
    this.titleB.textContent = this.describe("B", c.what === "heads" ? c.a : c.b.label, b);
    this.mapA.draw({ title: this.titleA.textContent, rows: numbered(qa), cols: numbered(ka), get: (r, k) => ma[r * ka.length + k],
      scale: () => topA, cellW: cell(ka.length), cellH: cell(ka.length), value: h.value, rowName: "query", colName: "key" });
    this.mapB.draw({ title: this.titleB.textContent, rows: numbered(qb), cols: numbered(kb), get: (r, k) => mb[r * kb.length + k],
      scale: () => topB, cellW: cell(kb.length), cellH: cell(kb.length), value: h.value, rowName: "query", colName: "key" });
    const rows = Math.min(qa.length, qb.length), cols = Math.min(ka.length, kb.length);
    const both = (x, y) => (x === y ? x : `${x} / ${y}`);
    const d = (r, k) => ma[r * ka.length + k] - mb[r * kb.length + k];
    let max = 0;
    for (let r = 0; r < rows; r++) for (let k = 0; k < cols; k++) { const v = Math.abs(d(r, k)); if (v > max) max = v; }
    const rowLabels = numbered([...Array(rows).keys()].map((i) => both(qa[i], qb[i])));
    const colLabels = numbered([...Array(cols).keys()].map((i) => both(ka[i], kb[i])));
    this.mapD.draw({ title: "A − B", rows: rowLabels, cols: colLabels, get: d, scale: () => 1, paint: (v) => diverging(v / (max || 1)),
      cellW: cell(cols) * 1.4, cellH: cell(cols) * 1.4, value: "A − B", rowName: "query", colName: "key" });
    const dropped = qa.length + qb.length - 2 * rows, droppedCols = ka.length + kb.length - 2 * cols;
    const same = rowLabels.every((l, i) => !l.includes(" / ")) && colLabels.every((l) => !l.includes(" / ")) && !dropped && !droppedCols;
    this.summary.replaceChildren(el("b", "", `max |A − B| = ${max.toFixed(3)}`),
      el("div", "", "Red: A puts more weight there; blue: B does (white: the same)."));
    if (!same) {
      this.summary.append(el("div", "", "The maps have different tokens, so they are compared position by position: a "
        + "label “girl / boy” marks a position where A and B have different tokens."
        + (dropped || droppedCols ? ` ${Math.abs(qa.length - qb.length)} row(s) and ${Math.abs(ka.length - kb.length)} column(s) that only one map has are left out.` : "")));
    }
    this.summary.dataset.maxAbs = String(max);
  },
});
