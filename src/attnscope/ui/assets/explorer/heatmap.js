// Part 4: heatmap mode (and a map of one kind): one head large, every layer × head below.
Object.assign(Explorer.prototype, {
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
  },

  renderHeatmap() {
    const h = this.w.h, s = this.sel, kind = s.kind, info = h.kinds[kind];
    const who = s.head === null ? "mean of heads" : `head ${s.head}`;
    const value = h.value === "weight" ? "" : ` · ${h.value}`;
    const prefix = h.title ? `${h.title}: ` : "";
    this.title.textContent = `${prefix}${KIND_LABELS[kind]} · layer ${s.layer} · ${who}${value}`;
    if (!this.w.has(kind, s.layer)) {
      this.missing.textContent = `Fetching layer ${s.layer} from the server…`;
      this.mainScroll.style.display = this.gridScroll.style.display = "none";
      return this.fetch(s.layer);
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
  },

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
  },

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
  },

  gridAt(e) {
    const d = this.grid.dataset, box = this.grid.getBoundingClientRect();
    const x = e.clientX - box.left - Number(d.left), y = e.clientY - box.top - Number(d.top);
    const cw = Number(d.mapW) + Number(d.gap), ch = Number(d.mapH) + Number(d.gap);
    const hd = Math.floor(x / cw), li = Math.floor(y / ch), layers = d.layers.split(",").map(Number);
    if (x < 0 || y < 0 || hd >= Number(d.heads) || li >= layers.length || x % cw > Number(d.mapW) || y % ch > Number(d.mapH)) return null;
    return [layers[li], hd];
  },

  gridHover(e) {
    const at = this.gridAt(e);
    if (!at) { this.tip.style.display = "none"; return; }
    this.tip.textContent = `layer ${at[0]}, head ${at[1]} (click to open it above)`;
    Object.assign(this.tip.dataset, { cells: "grid", row: at[0], col: at[1], value: "" });
    const root = this.root.getBoundingClientRect();
    Object.assign(this.tip.style, { display: "block", left: `${e.clientX - root.left + 14}px`, top: `${e.clientY - root.top + 14}px` });
  },
});
