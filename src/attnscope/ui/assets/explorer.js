// attnscope's attention explorer: one sentence's attention (viz/explorer.py's payload) drawn on canvas, every look
// (kind, layer, head, step, hover, zoom, play) answered in the browser. The selection goes back to the server
// (setStateValue "view", debounced) so the sidebar, the other pages and the URL follow without the view waiting.

const BLUES = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214],
  [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107]];  // ColorBrewer "Blues", as the plotly figures use
const MASKED = [217, 217, 217];  // cells a mask forbids (future positions): grey, not 0
const KINDS = ["encoder", "decoder", "cross"];
const KIND_LABELS = { encoder: "Encoder self-attention", decoder: "Decoder masked self-attention", cross: "Cross-attention" };
const KIND_KEYS = { e: "encoder", d: "decoder", c: "cross" };
const PLAY_MS = 600;  // between steps while playing
const SEND_MS = 400;  // the selection goes to the server once the user pauses this long: each send is a page rerun
// A selection not yet sent, kept for whichever explorer is mounted next (the user may leave the page before the pause
// ends: the next explorer, on any page, sends it; sending from a leaving one would rerun the page being left).
let pending = null;
const LABEL_PX = 11;  // a label needs this many pixels of cell; fewer: every n-th label (zoom in for all)

function colour(t) {
  if (!(t >= 0)) t = 0;
  if (t > 1) t = 1;
  const x = t * (BLUES.length - 1), i = Math.min(Math.floor(x), BLUES.length - 2), f = x - i;
  return BLUES[i].map((a, j) => Math.round(a + (BLUES[i + 1][j] - a) * f));
}

function css([r, g, b]) { return `rgb(${r},${g},${b})`; }

function diverging(t) {  // -1 blue, 0 white, +1 red (a difference A − B)
  const x = Math.max(-1, Math.min(1, t)), end = x < 0 ? [33, 102, 172] : [178, 24, 43], f = Math.abs(x);
  return [255, 255, 255].map((w, j) => Math.round(w + (end[j] - w) * f));
}

function tokensOf(t, kind) {  // [query tokens, key tokens] of one kind of a record's tokens {source, target, output}
  const rows = kind === "encoder" ? t.source : kind === "cross" && t.output ? t.output : t.target;
  return [rows, kind === "decoder" ? t.target : t.source];
}

function numbered(tokens) { return tokens.map((x, i) => `${i}: ${x}`); }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function readPayload(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== "ATSX") throw new Error("not an attnscope explorer payload");
  const length = view.getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + length)));
  const start = (12 + length + 3) & ~3;
  return { header, start };
}

// One sentence's weights: values by (kind, layer, head, query, key), and whole maps (cached, means computed here).
class Weights {
  constructor(header, floats) {
    this.h = header;
    this.f = floats;
    this.maps = new Map();
  }
  info(kind) { return this.h.kinds[kind]; }
  has(kind, layer) { return this.info(kind).layers.includes(layer); }
  value(kind, layer, head, q, k) {
    const info = this.info(kind), li = info.layers.indexOf(layer);
    if (info.lower) {
      if (k > q) return NaN;
      return this.f[info.offset + (li * info.heads + head) * (info.queries * (info.queries + 1) / 2) + q * (q + 1) / 2 + k];
    }
    return this.f[info.offset + ((li * info.heads + head) * info.queries + q) * info.keys + k];
  }
  map(kind, layer, head) {  // [Q * K], NaN where masked; head null: the mean of heads
    const key = `${kind}|${layer}|${head}`;
    if (this.maps.has(key)) return this.maps.get(key);
    const info = this.info(kind), Q = info.queries, K = info.keys;
    const heads = head === null ? [...Array(info.heads).keys()] : [head];
    const out = head === null ? new Float64Array(Q * K) : new Float32Array(Q * K);
    for (let q = 0; q < Q; q++) for (let k = 0; k < K; k++) {
      let s = 0;
      for (const h of heads) s += this.value(kind, layer, h, q, k);
      out[q * K + k] = heads.length === 1 ? s : s / heads.length;
    }
    this.maps.set(key, out);
    return out;
  }
}

// A matrix of coloured cells with labelled rows and columns, the row and column under the pointer highlighted and
// the exact value in a tooltip. `get(r, c)` gives a value (NaN: masked); `scale(r)` the maximum of row r's colours.
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
  draw(spec) {  // {rows, cols, get, scale, cellW, cellH, value, rowName, colName, outline, mark}
    this.spec = spec;
    const { rows, cols } = spec, dpr = window.devicePixelRatio || 1;
    const ctx = this.canvas.getContext("2d");
    ctx.font = "11px sans-serif";
    const widest = (labels) => Math.min(170, Math.max(10, ...labels.map((l) => ctx.measureText(l).width)));
    this.left = widest(rows) + 8;
    this.top = Math.ceil(widest(cols) * Math.sin(Math.PI / 3)) + 10;
    const w = this.left + cols.length * spec.cellW + 4, h = this.top + rows.length * spec.cellH + 4;
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
        const rgb = Number.isNaN(v) ? MASKED : spec.paint ? spec.paint(v) : colour(v / top);
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
    cols.forEach((label, c) => {
      if (c % colEvery !== 0) return;
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
    this.tip.textContent = `${s.rowName} ${s.rows[r]}\n${s.colName} ${s.cols[c]}\n` +
      (Number.isNaN(v) ? "masked (future position)" : `${s.value} ${v.toPrecision(7)}`);
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

class Explorer {
  constructor(root) {
    this.root = root;
    this.zoom = 1;
    this.perHead = null;
    root.addEventListener("keydown", (e) => this.key(e));
    root.addEventListener("mousedown", () => root.focus({ preventScroll: true }));
  }

  receive(bytes, send) {
    this.send = send;
    const { header, start } = readPayload(bytes);
    const same = this.w && header.id === this.w.h.id, moved = header.epoch !== this.epoch;
    this.epoch = header.epoch;  // a new epoch: the view was changed elsewhere (sidebar, URL, another page)
    if (same && header.complete && this.w.h.complete) {
      if (!moved) return;  // a rerun after a click here: the browser's own view stands
      this.sel = this.fit(header.selection);  // changed in the sidebar, the URL or another page: follow it
      return this.render();
    }
    this.w = new Weights(header, new Float32Array(bytes.slice(start).buffer));
    const b = header.compare && header.compare.b;
    this.wb = b ? new Weights({ kinds: b.kinds }, this.w.f) : this.w;  // B: another record, or A's own
    if (!same || moved) this.sel = this.fit({ ...header.selection, ...(!same && pending ? pending : {}) });  // latest pick
    if (!same) {
      this.perHead = null;
      this.stop();
      this.build();
    }
    this.render();
  }

  fit(s) {
    const h = this.w.h, kinds = h.kinds, kind = h.kind || (KINDS.includes(s.kind) ? s.kind : "cross");
    const layer = Math.max(0, Math.min(s.layer | 0, kinds[kind].n_layers - 1));
    const head = s.head === null || s.head === undefined || s.head >= kinds[kind].heads ? null : Math.max(0, s.head | 0);
    const step = Math.max(0, Math.min(s.step | 0, h.target.length - 1));
    return { kind, layer, head, step };
  }

  set(change, quiet) {
    this.sel = this.fit({ ...this.sel, ...change });
    if (!quiet) this.schedule();
    this.render();  // after: a layer the payload lacks is asked for at once, not after the pause
  }

  schedule(now) {  // the server hears of the selection when the user pauses (at once: when it must fetch a layer)
    const { kind, layer, head, step } = this.sel;  // a map of one kind says only its layer and head
    pending = this.w.h.mode === "map" ? { ...pending, layer, head } : { kind, layer, head, step };
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.deliver(), now ? 0 : SEND_MS);
  }

  deliver() {
    this.timer = null;
    if (!pending) return;
    const view = pending;
    pending = null;
    this.send("view", view);
  }

  arm() {  // on every mount or render: a selection left pending (by this explorer or one that left) goes out
    if (pending && !this.timer) this.timer = setTimeout(() => this.deliver(), SEND_MS);
  }

  disarm() {  // the explorer leaves: what is pending stays pending, for the next one
    clearTimeout(this.timer);
    this.timer = null;
  }

  build() {
    const r = this.root, h = this.w.h;
    r.replaceChildren();
    r.dataset.mode = h.mode;
    this.tip = el("div", "tip");
    this.bar = el("div", "bar");
    r.append(this.bar);
    if (h.mode === "step") this.buildStep(); else if (h.mode === "compare") this.buildCompare(); else this.buildHeatmap();
    r.append(this.tip);
  }

  buttons(label, items, current, pick) {
    const group = el("div", "group");
    group.append(el("span", "label", label));
    for (const [value, text] of items) {
      const b = el("button", value === current ? "on" : "", text);
      b.dataset.value = String(value);
      b.addEventListener("click", () => pick(value));
      group.append(b);
    }
    return group;
  }

  drawBar() {
    const h = this.w.h, s = this.sel, info = h.kinds[s.kind];
    const parts = [];
    if (h.mode === "heatmap" || h.mode === "compare") {
      parts.push(this.buttons(h.mode === "compare" ? "A" : "", KINDS.map((k) => [k, KIND_LABELS[k]]), s.kind, (kind) => this.set({ kind })));
    }
    const kind = h.mode === "step" ? "cross" : s.kind;
    parts.push(this.buttons("Layer", [...Array(h.kinds[kind].n_layers).keys()].map((l) => [l, String(l)]), s.layer,
      (layer) => this.set({ layer })));
    parts.push(this.buttons("Head", [["mean", "mean"], ...[...Array(info.heads).keys()].map((x) => [x, String(x)])],
      s.head === null ? "mean" : s.head, (head) => this.set({ head: head === "mean" ? null : head })));
    const scale = el("label", "toggle");
    const box = el("input");
    box.type = "checkbox";
    box.checked = this.perHeadScale();
    box.addEventListener("change", () => { this.perHead = box.checked; this.render(); });
    scale.append(box, document.createTextNode(" colours per head"));
    const zoom = el("div", "group");
    zoom.append(el("span", "label", "Zoom"));
    for (const [text, f] of [["−", 1 / 1.5], ["fit", 0], ["+", 1.5]]) {
      const b = el("button", "", text);
      b.addEventListener("click", () => this.zoomBy(f));
      zoom.append(b);
    }
    this.bar.replaceChildren(...parts, scale, zoom);
  }

  zoomBy(f) {
    this.zoom = f === 0 ? 1 : Math.max(0.25, Math.min(16, this.zoom * f));
    this.render();
  }

  perHeadScale() {
    if (this.perHead !== null) return this.perHead;
    return this.w.h.per_head_scale || this.w.h.value !== "weight";
  }

  rowLabels(kind) { return numbered(tokensOf(this.w.h, kind)[0]); }

  colLabels(kind) { return numbered(tokensOf(this.w.h, kind)[1]); }

  fitCell(n, room, min, max) {
    return Math.max(min, Math.min(max, Math.floor(room / Math.max(n, 1)))) * this.zoom;
  }

  // ---- heatmap mode: one head large, every layer x head below -------------------------------------------------
  buildHeatmap() {
    this.title = el("div", "title");
    this.mainScroll = el("div", "scroll main");
    this.main = new Cells(this.mainScroll, this.tip, "main");
    this.missing = el("div", "missing");
    this.gridTitle = el("div", "title");
    this.gridScroll = el("div", "scroll grid");
    this.grid = el("canvas", "grid");
    this.gridScroll.append(this.grid);
    this.grid.addEventListener("click", (e) => {
      const at = this.gridAt(e);
      if (at) this.set({ layer: at[0], head: at[1] });
    });
    this.grid.addEventListener("mousemove", (e) => this.gridHover(e));
    this.grid.addEventListener("mouseleave", () => { this.tip.style.display = "none"; });
    this.root.append(this.title, this.missing, this.mainScroll);
    if (this.w.h.mode === "heatmap") this.root.append(this.gridTitle, this.gridScroll);
  }

  room() { return Math.max(320, this.root.clientWidth - 24); }

  renderHeatmap() {
    const h = this.w.h, s = this.sel, kind = s.kind, info = h.kinds[kind];
    const who = s.head === null ? "mean of heads" : `head ${s.head}`;
    const value = h.value === "weight" ? "" : ` · ${h.value}`;
    const prefix = h.title ? `${h.title}: ` : "";
    this.title.textContent = `${prefix}${KIND_LABELS[kind]} · layer ${s.layer} · ${who}${value}`;
    if (!this.w.has(kind, s.layer)) {
      this.missing.textContent = `Fetching layer ${s.layer} from the server…`;
      this.mainScroll.style.display = this.gridScroll.style.display = "none";
      return this.schedule(true);
    }
    this.missing.textContent = "";
    this.mainScroll.style.display = this.gridScroll.style.display = "";
    const rows = this.rowLabels(kind), cols = this.colLabels(kind), m = this.w.map(kind, s.layer, s.head);
    let top = 1;
    if (this.perHeadScale()) top = m.reduce((a, v) => (v > a ? v : a), 0);
    const cell = this.fitCell(cols.length, this.room() - 180, 4, 44);
    const outline = kind === "encoder" ? [] : [s.step];
    this.main.draw({ title: this.title.textContent, rows, cols, get: (r, c) => m[r * info.keys + c], scale: () => top, cellW: cell, cellH: cell,
      value: h.value, rowName: kind === "cross" && h.output ? "step (chose)" : "query", colName: "key", outline });
    if (h.mode === "heatmap") this.drawGrid();
  }

  drawGrid() {
    const h = this.w.h, s = this.sel, kind = s.kind, info = h.kinds[kind], dpr = window.devicePixelRatio || 1;
    const layers = info.layers, H = info.heads, Q = info.queries, K = info.keys;
    this.gridTitle.textContent = `${KIND_LABELS[kind]}: every layer and head (click one to open it; the open one is outlined)`;
    const size = Math.max(48, Math.min(150, Math.floor((this.room() - 40) / H) - 6)) * Math.min(this.zoom, 4);
    const mw = size, mh = Math.max(12, Math.round(size * Math.min(2, Q / Math.max(K, 1)))), gap = 6, left = 34, top = 18;
    const w = left + H * (mw + gap), hh = top + layers.length * (mh + gap);
    const c = this.grid;
    c.width = Math.ceil(w * dpr); c.height = Math.ceil(hh * dpr);
    c.style.width = `${w}px`; c.style.height = `${hh}px`;
    Object.assign(c.dataset, { left, top, mapW: mw, mapH: mh, gap, layers: layers.join(","), heads: H });
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hh);
    ctx.font = "11px sans-serif";
    ctx.fillStyle = getComputedStyle(this.root).color || "#333";
    ctx.textBaseline = "middle";
    const pw = Math.max(1, Math.round(mw * dpr)), ph = Math.max(1, Math.round(mh * dpr));
    ctx.imageSmoothingEnabled = false;
    const perHead = this.perHeadScale();
    for (let hd = 0; hd < H; hd++) ctx.fillText(`H${hd}`, left + hd * (mw + gap) + mw / 2 - 8, top / 2);
    layers.forEach((layer, li) => {
      ctx.fillText(`L${layer}`, 4, top + li * (mh + gap) + mh / 2);
      for (let hd = 0; hd < H; hd++) {
        const m = this.w.map(kind, layer, hd), pooled = this.pool(m, Q, K, ph, pw);
        const x = left + hd * (mw + gap), y = top + li * (mh + gap);
        ctx.drawImage(pooled.canvas(perHead), x, y, mw, mh);
        if (layer === s.layer && hd === s.head) {
          ctx.strokeStyle = "#d62728"; ctx.lineWidth = 3; ctx.strokeRect(x - 2, y - 2, mw + 4, mh + 4);
        }
      }
    });
  }

  // Down to at most (ph x pw) pixels by the maximum of each block: a strong weight never fades into its neighbours.
  pool(m, Q, K, ph, pw) {
    const rows = Math.min(Q, ph), cols = Math.min(K, pw), out = new Float32Array(rows * cols).fill(NaN);
    let max = 0;
    for (let q = 0; q < Q; q++) {
      const r = Math.floor(q * rows / Q);
      for (let k = 0; k < K; k++) {
        const v = m[q * K + k], i = r * cols + Math.floor(k * cols / K);
        if (!Number.isNaN(v)) {
          if (!(out[i] >= v)) out[i] = v;
          if (v > max) max = v;
        }
      }
    }
    return {
      canvas: (perHead) => {
        const top = perHead || this.w.h.value !== "weight" ? max || 1 : 1, image = new ImageData(cols, rows);
        for (let i = 0; i < out.length; i++) {
          const rgb = Number.isNaN(out[i]) ? MASKED : colour(out[i] / top);
          image.data.set([rgb[0], rgb[1], rgb[2], 255], 4 * i);
        }
        const p = document.createElement("canvas");
        p.width = cols; p.height = rows;
        p.getContext("2d").putImageData(image, 0, 0);
        return p;
      },
    };
  }

  gridAt(e) {
    const d = this.grid.dataset, box = this.grid.getBoundingClientRect();
    const x = e.clientX - box.left - Number(d.left), y = e.clientY - box.top - Number(d.top);
    const cw = Number(d.mapW) + Number(d.gap), ch = Number(d.mapH) + Number(d.gap);
    const hd = Math.floor(x / cw), li = Math.floor(y / ch), layers = d.layers.split(",").map(Number);
    if (x < 0 || y < 0 || hd >= Number(d.heads) || li >= layers.length || x % cw > Number(d.mapW) || y % ch > Number(d.mapH)) return null;
    return [layers[li], hd];
  }

  gridHover(e) {
    const at = this.gridAt(e);
    if (!at) { this.tip.style.display = "none"; return; }
    this.tip.textContent = `layer ${at[0]}, head ${at[1]} (click to open it above)`;
    Object.assign(this.tip.dataset, { cells: "grid", row: at[0], col: at[1], value: "" });
    const root = this.root.getBoundingClientRect();
    Object.assign(this.tip.style, { display: "block", left: `${e.clientX - root.left + 14}px`, top: `${e.clientY - root.top + 14}px` });
  }

  // ---- step mode: one decoding step at a time --------------------------------------------------------------------
  buildStep() {
    const controls = el("div", "controls");
    this.prev = el("button", "", "◀ Previous");
    this.next = el("button", "", "Next ▶");
    this.play = el("button", "", "▶ Play");
    this.slider = el("input", "slider");
    this.slider.type = "range";
    this.slider.min = 0;
    this.slider.max = this.w.h.target.length - 1;
    this.counter = el("span", "counter");
    this.prev.addEventListener("click", () => this.move(-1));
    this.next.addEventListener("click", () => this.move(1));
    this.play.addEventListener("click", () => this.toggle());
    this.slider.addEventListener("input", () => this.set({ step: Number(this.slider.value) }));
    controls.append(this.prev, this.next, this.play, this.slider, this.counter);
    this.headline = el("div", "headline");
    this.sourceTitle = el("div", "title");
    this.source = el("div", "source");
    const columns = el("div", "columns");
    this.topk = el("div", "topk");
    const right = el("div", "scroll");
    this.crossTitle = el("div", "title");
    right.append(this.crossTitle);
    this.crossRows = new Cells(right, this.tip, "cross-rows");
    columns.append(this.topk, right);
    this.selfTitle = el("div", "title");
    const below = el("div", "scroll");
    this.selfRows = new Cells(below, this.tip, "self-rows");
    this.missing = el("div", "missing");
    this.root.append(controls, this.headline, this.missing, this.sourceTitle, this.source, columns, this.selfTitle, below);
  }

  move(delta) { this.set({ step: this.sel.step + delta }); }

  toggle() {
    if (this.playing) return this.stop(true);
    if (this.sel.step >= this.w.h.target.length - 1) this.set({ step: 0 }, true);
    this.playing = setInterval(() => {
      if (this.sel.step >= this.w.h.target.length - 1) return this.stop(true);
      this.set({ step: this.sel.step + 1 }, true);
    }, PLAY_MS);
    this.render();
  }

  stop(send) {
    if (!this.playing) return;
    clearInterval(this.playing);
    this.playing = null;
    if (this.play) this.render();
    if (send) this.schedule();
  }

  stepRows(kind, t) {  // rows of every (present) layer's heads and their mean at step t
    const info = this.w.h.kinds[kind], labels = [], heads = [];
    for (const layer of info.layers) {
      for (let hd = 0; hd < info.heads; hd++) { labels.push(`L${layer} H${hd}`); heads.push([layer, hd]); }
      labels.push(`L${layer} mean`);
      heads.push([layer, null]);
    }
    const get = (r, c) => {  // read from the step's row itself: a long output never builds whole maps here
      const [layer, hd] = heads[r];
      if (hd !== null) return this.w.value(kind, layer, hd, t, c);
      let sum = 0;
      for (let h = 0; h < info.heads; h++) sum += this.w.value(kind, layer, h, t, c);
      return sum / info.heads;
    };
    const outline = heads.flatMap(([l, hd], r) => (l === this.sel.layer && hd === this.sel.head ? [r] : []));
    return { labels, heads, get, outline };
  }

  renderStep() {
    const h = this.w.h, s = this.sel, t = s.step, n = h.target.length, step = h.steps ? h.steps[t] : null;
    this.prev.disabled = t === 0;
    this.next.disabled = t >= n - 1;
    this.play.textContent = this.playing ? "❚❚ Pause" : "▶ Play";
    this.slider.value = t;
    this.counter.textContent = `step ${t} of ${n - 1}`;
    const prefix = h.target.slice(0, t + 1).join(" ");
    this.headline.replaceChildren(el("b", "", "Decoder input so far: "), document.createTextNode(`${prefix} → `));
    if (step) {
      this.headline.append(el("b", "", "chose "), document.createTextNode(`“${step.token}” with probability ${step.prob.toFixed(3)}`));
    } else if (h.output || t + 1 < n) {  // a saved record: no probabilities, only what came next
      this.headline.append(el("b", "", "next "), document.createTextNode(`“${h.output ? h.output[t] : h.target[t + 1]}”`));
    } else {
      this.headline.append(document.createTextNode("(the last step of the record)"));
    }
    if (!this.w.has("cross", s.layer)) {
      this.missing.textContent = `Fetching layer ${s.layer} from the server…`;
      return this.schedule(true);
    }
    this.missing.textContent = "";
    const who = s.head === null ? "mean of heads" : `head ${s.head}`;
    this.sourceTitle.textContent = `Source as seen at step ${t} (cross-attention, layer ${s.layer}, ${who}; shaded up to the row's maximum)`;
    const row = this.w.map("cross", s.layer, s.head), K = h.kinds.cross.keys;
    const values = h.source.map((_, k) => row[t * K + k]), max = Math.max(...values) || 1;
    this.source.replaceChildren(...h.source.map((token, k) => {
      const span = el("span", "token", token), rgb = colour(values[k] / max);
      span.style.background = css(rgb);
      span.style.color = values[k] / max > 0.55 ? "white" : "black";
      span.title = `${h.value} ${values[k].toPrecision(7)}`;
      return span;
    }));
    this.topk.replaceChildren();
    if (step) {
      this.topk.append(el("div", "title", `Step ${t}: chose “${step.token}” · p = ${step.prob.toFixed(3)} · entropy ${step.entropy.toFixed(2)} nats`));
      for (const [token, p] of step.top) {
        const line = el("div", token === step.token ? "bar-line chosen" : "bar-line");
        const fill = el("span", "fill");
        fill.style.width = `${Math.max(1, p * 100)}%`;
        line.append(el("span", "tok", token), fill, el("span", "p", p.toFixed(3)));
        this.topk.append(line);
      }
    }
    const scaled = this.perHeadScale();
    const cross = this.stepRows("cross", t);
    const crossMax = (r) => (scaled ? Math.max(...h.source.map((_, c) => cross.get(r, c))) : 1);
    const cell = (n) => this.fitCell(n, (this.room() - 200) * 0.6, 6, 30);
    this.crossTitle.textContent = `Cross-attention of step ${t}, every layer and head (click a row to pick it)`;
    this.crossRows.draw({ title: this.crossTitle.textContent, rows: cross.labels, cols: h.source.map((x, i) => `${i}: ${x}`), get: cross.get, scale: crossMax,
      cellW: cell(h.source.length), cellH: 14 * Math.min(this.zoom, 2), value: h.value, rowName: "head", colName: "source",
      outline: cross.outline });
    this.crossRows.onClick = (r) => this.set({ layer: cross.heads[r][0], head: cross.heads[r][1] });
    const self = this.stepRows("decoder", t);
    const selfMax = (r) => (scaled ? Math.max(...h.target.slice(0, t + 1).map((_, c) => self.get(r, c))) : 1);
    this.selfTitle.textContent = `Decoder masked self-attention of step ${t} (grey: future positions, masked)`;
    this.selfRows.draw({ title: this.selfTitle.textContent, rows: self.labels, cols: h.target.map((x, i) => `${i}: ${x}`), get: self.get, scale: selfMax,
      cellW: this.fitCell(h.target.length, this.room() - 200, 6, 30), cellH: 14 * Math.min(this.zoom, 2), value: h.value,
      rowName: "head", colName: "prefix", outline: self.outline });
    this.selfRows.onClick = (r) => this.set({ layer: self.heads[r][0], head: self.heads[r][1] });
  }

  // ---- compare mode: A (the selection), B (another head, or the same head of another record), A − B ------------
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
  }

  pickB(change) {
    this.selB = { ...this.selB, ...change };
    this.render();
  }

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
  }

  describe(who, label, s) {
    return `${who} (${label}): ${KIND_LABELS[s.kind]} · layer ${s.layer} · ${s.head === null ? "mean of heads" : `head ${s.head}`}`;
  }

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
  }

  render() {
    const s = this.sel;
    Object.assign(this.root.dataset, { kind: s.kind, layer: s.layer, head: s.head === null ? "mean" : s.head, step: s.step });
    this.drawBar();
    const mode = this.w.h.mode;
    if (mode === "step") this.renderStep(); else if (mode === "compare") this.renderCompare(); else this.renderHeatmap();
  }

  key(e) {
    const s = this.sel, H = this.w.h.kinds[s.kind].heads, kind = this.w.h.mode === "step" ? "cross" : s.kind;
    const heads = [null, ...Array(H).keys()], at = heads.indexOf(s.head);
    const moves = {
      ArrowLeft: () => this.set({ step: s.step - 1 }),
      ArrowRight: () => this.set({ step: s.step + 1 }),
      ArrowUp: () => this.set({ head: heads[Math.max(0, at - 1)] }),
      ArrowDown: () => this.set({ head: heads[Math.min(heads.length - 1, at + 1)] }),
      PageUp: () => this.set({ layer: Math.max(0, s.layer - 1) }),
      PageDown: () => this.set({ layer: Math.min(this.w.h.kinds[kind].n_layers - 1, s.layer + 1) }),
      " ": () => (this.w.h.mode === "step" ? this.toggle() : null),
      "+": () => this.zoomBy(1.5),
      "=": () => this.zoomBy(1.5),
      "-": () => this.zoomBy(1 / 1.5),
    };
    const action = moves[e.key] || (KIND_KEYS[e.key] && ["heatmap", "compare"].includes(this.w.h.mode) ? () => this.set({ kind: KIND_KEYS[e.key] }) : null);
    if (!action) return;
    e.preventDefault();
    action();
  }
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  let root = parentElement.querySelector(".atsx");
  if (!root) {
    root = el("div", "atsx");
    root.tabIndex = 0;
    parentElement.append(root);
    root.explorer = new Explorer(root);
  }
  if (data) root.explorer.receive(data instanceof Uint8Array ? data : new Uint8Array(data), setStateValue);
  root.explorer.arm();
  return () => root.explorer.disarm();
}
