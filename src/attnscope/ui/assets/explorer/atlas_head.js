// Part 8: the atlas's open head, large: drag to pan, wheel or +/− to zoom, hover for the nearest point's token,
// sentence and position, a click on a point opens that sentence with this head selected (the trigger "open").

const HOVER_PX = 10;  // a point this close to the pointer is the one under it
const HEAD_PX = 420;  // the large map's height

Object.assign(Explorer.prototype, {
  bindHead() {
    const c = this.headOver;  // above the points: it takes the pointer
    let drag = null;
    c.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, moved: 0 }; });
    c.addEventListener("mousemove", (e) => {
      if (drag && e.buttons) {
        const dx = e.clientX - drag.x, dy = e.clientY - drag.y, v = this.headView();
        drag.moved += Math.abs(dx) + Math.abs(dy);
        Object.assign(drag, { x: e.clientX, y: e.clientY });
        this.view = { ...v, cx: v.cx - dx / v.scale, cy: v.cy + dy / v.scale };
        this.tip.style.display = "none";
        return this.drawHead();
      }
      this.hoverHead(e);
    });
    c.addEventListener("mouseup", (e) => {
      const click = drag && drag.moved < 4;
      drag = null;
      if (click) this.openPoint(this.nearest(e));
    });
    c.addEventListener("mouseleave", () => { drag = null; this.tip.style.display = "none"; });
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      this.zoomAt(e.deltaY < 0 ? 1.25 : 1 / 1.25, this.local(e));
    }, { passive: false });
  },

  headSize() { return { w: Math.max(320, Math.min(this.room(), 900)), h: HEAD_PX }; },

  headView() {  // {scale, cx, cy}: pixels per unit and the data point at the centre
    if (this.view) return this.view;
    const s = this.asel, box = this.atlas.box(s.kind, s.layer, s.head), { w, h } = this.headSize();
    const scale = Math.min((w - 20) / ((box[2] - box[0]) || 1), (h - 20) / ((box[3] - box[1]) || 1));
    return { scale, cx: (box[0] + box[2]) / 2, cy: (box[1] + box[3]) / 2 };
  },

  toScreen(v, x, y) {
    const { w, h } = this.headSize();
    return [w / 2 + (x - v.cx) * v.scale, h / 2 - (y - v.cy) * v.scale];
  },

  local(e) {
    const r = this.headOver.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  },

  zoomAt(f, at) {  // zoom by f, keeping the data point under `at` (CSS pixels; default the centre) in place
    const v = this.headView(), { w, h } = this.headSize(), [px, py] = at || [w / 2, h / 2];
    const x = v.cx + (px - w / 2) / v.scale, y = v.cy - (py - h / 2) / v.scale, scale = v.scale * f;
    this.view = { scale, cx: x - (px - w / 2) / scale, cy: y + (py - h / 2) / scale };
    this.drawHead();
  },

  zoomHead(z) {
    if (z === "fit") { this.view = null; return this.drawHead(); }
    this.zoomAt(z === "in" ? 1.5 : 1 / 1.5);
  },

  drawHead() {  // the points on one canvas; the hovered point's ring on another above it (hover redraws only that)
    const s = this.asel, c = this.headCanvas, dpr = window.devicePixelRatio || 1;
    const { w, h } = this.headSize(), v = this.headView();
    if (c.width !== Math.ceil(w * dpr) || c.height !== Math.ceil(h * dpr)) {  // a resize clears; a redraw need not
      for (const canvas of [c, this.headOver]) {
        canvas.width = Math.ceil(w * dpr); canvas.height = Math.ceil(h * dpr);
        canvas.style.width = `${w}px`; canvas.style.height = `${h}px`;
      }
      this.headWrap.style.height = `${h}px`;
      this.headImage = c.getContext("2d").createImageData(c.width, c.height);
    }
    Object.assign(c.dataset, { scale: v.scale, cx: v.cx, cy: v.cy });
    const image = this.headImage, size = Math.max(2, Math.round(3 * dpr));
    image.data.fill(0);
    const k = v.scale * dpr;  // data -> device pixels, the square centred on the point
    plot(image, this.atlas, s.kind, s.layer, s.head, this.atlas.rgb(s.kind, s.colouring),
      [k, (w / 2 - v.cx * v.scale) * dpr - size / 2, -k, (h / 2 + v.cy * v.scale) * dpr - size / 2], size);
    const ctx = c.getContext("2d");
    ctx.putImageData(image, 0, 0);
    ctx.strokeStyle = "rgba(49, 51, 63, 0.25)";
    ctx.strokeRect(0.5, 0.5, c.width - 1, c.height - 1);
    this.ring(this.hovered);
    this.root.dataset.drawn = String((Number(this.root.dataset.drawn) || 0) + 1);  // tests wait for a redraw
  },

  ring(i) {  // the hovered point circled (null: none)
    const c = this.headOver, ctx = c.getContext("2d"), dpr = window.devicePixelRatio || 1;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, c.width, c.height);
    if (i === null || i === undefined) return;
    const s = this.asel, f = this.atlas.f, b = this.atlas.base(s.kind, s.layer, s.head);
    const [x, y] = this.toScreen(this.headView(), f[b + 2 * i], f[b + 2 * i + 1]);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ctx.arc(x, y, 6, 0, 2 * Math.PI);
    ctx.stroke();
  },

  nearest(e) {  // the index of the point nearest the pointer within HOVER_PX, or null
    const s = this.asel, f = this.atlas.f, b = this.atlas.base(s.kind, s.layer, s.head), n = this.atlas.count(s.kind);
    const v = this.headView(), [px, py] = this.local(e), { w, h } = this.headSize();
    let best = null, bestD = HOVER_PX * HOVER_PX;
    for (let i = 0; i < n; i++) {
      const dx = w / 2 + (f[b + 2 * i] - v.cx) * v.scale - px, dy = h / 2 - (f[b + 2 * i + 1] - v.cy) * v.scale - py;
      const d = dx * dx + dy * dy;
      if (d <= bestD) { bestD = d; best = i; }
    }
    return best;
  },

  hoverHead(e) {
    const i = this.nearest(e), changed = i !== this.hovered;
    this.hovered = i;
    if (changed) this.ring(i);
    if (i === null) { this.tip.style.display = "none"; return; }
    const p = this.atlas.point(this.asel.kind, i), text = this.w.h.sentences[p.sentence];
    this.tip.textContent = `${p.query ? "query" : "key"} "${p.token}" · ${p.side} position ${p.position}\n` +
      `sentence ${p.sentence + 1}: ${text.length > 80 ? `${text.slice(0, 77)}…` : text}\n` +
      "click: open this sentence with this head";
    Object.assign(this.tip.dataset, { point: i, query: p.query, token: p.token, sentence: p.sentence,
      position: p.position });
    const r = this.root.getBoundingClientRect();
    this.tip.style.left = `${e.clientX - r.left + 14}px`;
    this.tip.style.top = `${e.clientY - r.top + 14}px`;
    this.tip.style.display = "block";
  },

  openPoint(i) {  // the sentence of point i, with this head; a query on the target side opens its step
    if (i === null || !this.trigger) return;
    const s = this.asel, p = this.atlas.point(s.kind, i);
    this.trigger("open", { sentence: p.sentence, kind: s.kind, layer: s.layer, head: s.head,
      step: p.side === "target" ? p.position : 0 });
  },

  pointAt(i) {  // where point i of the open head is on the page (client pixels), for tests
    const s = this.asel, f = this.atlas.f, b = this.atlas.base(s.kind, s.layer, s.head);
    const [x, y] = this.toScreen(this.headView(), f[b + 2 * i], f[b + 2 * i + 1]);
    const r = this.headCanvas.getBoundingClientRect();
    return { x: r.left + x, y: r.top + y, inside: x >= 0 && y >= 0 && x <= r.width && y <= r.height };
  },

  keyAtlas(e) {
    const s = this.asel, info = this.w.h.kinds[s.kind];
    const moves = { ArrowUp: { head: Math.max(0, s.head - 1) },
      ArrowDown: { head: Math.min(info.heads - 1, s.head + 1) },
      PageUp: { layer: Math.max(0, s.layer - 1) }, PageDown: { layer: Math.min(info.n_layers - 1, s.layer + 1) } };
    if (e.key === "+" || e.key === "=" || e.key === "-") {
      e.preventDefault();
      return this.zoomHead(e.key === "-" ? "out" : "in");
    }
    if (!moves[e.key]) return;
    e.preventDefault();
    Object.assign(this.asel, moves[e.key]);
    this.view = null;
    this.renderAtlas("head");
  },
});
