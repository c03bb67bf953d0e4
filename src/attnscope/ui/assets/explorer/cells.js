// Part 2: Cells, one canvas of coloured cells (every map and row view of the explorer is one).

// A matrix of coloured cells with labelled rows and columns, the row and column under the pointer highlighted and
// the exact value in a tooltip. `get(r, c)` gives a value (NaN: masked); `scale(r)` the maximum of row r's colours,
// or `paint(v, r)` its colour. Optional: `noColLabels`, `tail(r)` (text after row r), `text(r, c)` and `ink(r, c)`
// (written in each cell), `format(v)` (the value on hover), `note(r)` (a line added to the hover), `labelMax` (px).
class Cells {
  constructor(parent, tip, name) {
    this.wrap = el("div", "cells-wrap");
    this.wrap.dataset.name = name;
    this.canvas = el("canvas", "cells");
    this.over = el("canvas", "cells-over");
    this.wrap.append(this.canvas, this.over);
    parent.append(this.wrap);
    this.tip = tip;
    this.over.addEventListener("mousemove", (e) => this.hover(e));
    this.over.addEventListener("mouseleave", () => this.leave());
    this.over.addEventListener("click", (e) => {
      const at = this.at(e);
      if (at && this.onClick) this.onClick(at[0], at[1]);
    });
  }
  draw(spec) {  // {rows, cols, get, scale, cellW, cellH, value, rowName, colName, outline, paint, tail, text, ...}
    this.spec = spec;
    const { rows, cols } = spec, dpr = window.devicePixelRatio || 1;
    const ctx = this.canvas.getContext("2d");
    ctx.font = "11px sans-serif";
    const widest = (labels) => Math.min(spec.labelMax || 170, Math.max(10, ...labels.map((l) => ctx.measureText(l).width)));
    this.left = widest(rows) + 8;
    this.top = spec.noColLabels ? 2 : Math.ceil(widest(cols) * Math.sin(Math.PI / 3)) + 10;
    const tails = spec.tail ? rows.map((_, r) => spec.tail(r)) : [];
    this.wrap.dataset.tails = tails.join("|");  // what the canvas writes after each row, for tests
    const right = tails.length ? Math.max(...tails.map((t) => ctx.measureText(t).width)) + 10 : 0;
    const w = this.left + cols.length * spec.cellW + 4 + right, h = this.top + rows.length * spec.cellH + 4;
    for (const c of [this.canvas, this.over]) {
      c.width = Math.ceil(w * dpr); c.height = Math.ceil(h * dpr);
      c.style.width = `${w}px`; c.style.height = `${h}px`;
    }
    this.wrap.style.height = `${h}px`;
    this.wrap.style.width = `${w}px`;
    Object.assign(this.canvas.dataset, { left: this.left, top: this.top, cellW: spec.cellW, cellH: spec.cellH,
      rows: rows.length, cols: cols.length });
    this.canvas.setAttribute("role", "img");  // what the canvas shows, for screen readers (and tests)
    this.canvas.setAttribute("aria-label", `${spec.title}. Rows (${spec.rowName}): ${rows.join(", ")}. Columns (${spec.colName}): ${cols.join(", ")}.`);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const image = new ImageData(cols.length, rows.length);
    for (let r = 0; r < rows.length; r++) {
      const top = spec.scale(r) || 1;
      for (let c = 0; c < cols.length; c++) {
        const v = spec.get(r, c), i = 4 * (r * cols.length + c);
        const rgb = Number.isNaN(v) ? MASKED : spec.paint ? spec.paint(v, r) : colour(v / top);
        image.data[i] = rgb[0]; image.data[i + 1] = rgb[1]; image.data[i + 2] = rgb[2]; image.data[i + 3] = 255;
      }
    }
    const pixels = document.createElement("canvas");
    pixels.width = cols.length; pixels.height = rows.length;
    pixels.getContext("2d").putImageData(image, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(pixels, this.left, this.top, cols.length * spec.cellW, rows.length * spec.cellH);
    ctx.fillStyle = getComputedStyle(this.wrap).color || "#333";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    const rowEvery = Math.ceil(LABEL_PX / spec.cellH), colEvery = Math.ceil(LABEL_PX / spec.cellW);
    rows.forEach((label, r) => {
      if (r % rowEvery === 0) ctx.fillText(label, this.left - 4, this.top + (r + 0.5) * spec.cellH);
    });
    ctx.textAlign = "left";
    tails.forEach((t, r) => ctx.fillText(t, this.left + cols.length * spec.cellW + 8, this.top + (r + 0.5) * spec.cellH));
    if (spec.text && spec.cellW >= 16) this.writeCells(ctx);  // numbers where they fit; hover tells the rest
    cols.forEach((label, c) => {
      if (spec.noColLabels || c % colEvery !== 0) return;
      ctx.save();
      ctx.translate(this.left + (c + 0.5) * spec.cellW, this.top - 4);
      ctx.rotate(-Math.PI / 3);
      ctx.fillText(label, 0, 0);
      ctx.restore();
    });
    ctx.strokeStyle = "#d62728";
    ctx.lineWidth = 2;
    for (const r of spec.outline || []) ctx.strokeRect(this.left, this.top + r * spec.cellH, cols.length * spec.cellW, spec.cellH);
    this.highlight(null);
  }
  writeCells(ctx) {
    const s = this.spec;
    ctx.save();
    ctx.textAlign = "center";
    for (let r = 0; r < s.rows.length; r++) for (let c = 0; c < s.cols.length; c++) {
      ctx.fillStyle = s.ink ? s.ink(r, c) : "#0b1f33";
      ctx.fillText(s.text(r, c), this.left + (c + 0.5) * s.cellW, this.top + (r + 0.5) * s.cellH);
    }
    ctx.restore();
  }
  at(e) {
    const box = this.over.getBoundingClientRect(), s = this.spec;
    const c = Math.floor((e.clientX - box.left - this.left) / s.cellW), r = Math.floor((e.clientY - box.top - this.top) / s.cellH);
    return r >= 0 && c >= 0 && r < s.rows.length && c < s.cols.length ? [r, c] : null;
  }
  highlight(at) {
    const ctx = this.over.getContext("2d"), dpr = window.devicePixelRatio || 1, s = this.spec;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.over.width, this.over.height);
    if (!at) return;
    const [r, c] = at;
    ctx.fillStyle = "rgba(255, 200, 0, 0.18)";
    ctx.fillRect(this.left, this.top + r * s.cellH, s.cols.length * s.cellW, s.cellH);
    ctx.fillRect(this.left + c * s.cellW, this.top, s.cellW, s.rows.length * s.cellH);
    ctx.strokeStyle = "#222";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(this.left + c * s.cellW, this.top + r * s.cellH, s.cellW, s.cellH);
  }
  hover(e) {
    const at = this.at(e);
    this.highlight(at);
    if (!at) return this.leave();
    const [r, c] = at, s = this.spec, v = s.get(r, c);
    const shown = s.format ? s.format(v) : Number.isNaN(v) ? "masked (future position)" : `${s.value} ${v.toPrecision(7)}`;
    this.tip.textContent = `${s.rowName} ${s.rows[r]}\n${s.colName} ${s.cols[c]}\n${shown}${s.note ? `\n${s.note(r)}` : ""}`;
    Object.assign(this.tip.dataset, { cells: this.wrap.dataset.name, row: r, col: c, value: Number.isNaN(v) ? "masked" : String(v) });
    this.tip.style.display = "block";
    const root = this.tip.parentElement.getBoundingClientRect();
    this.tip.style.left = `${e.clientX - root.left + 14}px`;
    this.tip.style.top = `${e.clientY - root.top + 14}px`;
  }
  leave() {
    this.highlight(null);
    this.tip.style.display = "none";
  }
}
