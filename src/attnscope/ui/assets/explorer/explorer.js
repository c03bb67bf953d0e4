// Part 3: the Explorer, what every mode shares: the payload received, the selection and what the server
// hears of it (setStateValue "view" once the user pauses), the toolbar, the keyboard; then the component's entry.
// The parts after it add each mode's views to it (heatmap and map, step, compare, inside).

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
    const floats = () => new Float32Array(bytes.slice(start).buffer);
    if (header.mode === "atlas") return this.receiveAtlas(header, floats());  // parts 7-8
    if (header.mode === "inside") return this.receiveInside(header, new Float32Array(bytes.slice(start).buffer));
    const same = this.w && header.id === this.w.h.id, moved = header.epoch !== this.epoch;
    this.epoch = header.epoch;  // a new epoch: the view was changed elsewhere (sidebar, URL, another page)
    if (same && header.complete && this.w.h.complete) {
      if (!moved) return;  // a rerun after a click here: the browser's own view stands
      this.sel = this.fit(header.selection);  // changed in the sidebar, the URL or another page: follow it
      return this.render();
    }
    const shownKind = this.w && (this.w.h.mode === "step" ? "cross" : this.sel.kind);
    if (same && !moved && this.w.has(shownKind, this.sel.layer) && !header.kinds[shownKind].layers.includes(this.sel.layer)) {
      return;  // a rerun's late payload of a layer picked before: keep the layer the view shows
    }
    this.w = new Weights(header, new Float32Array(bytes.slice(start).buffer));
    const b = header.compare && header.compare.b;
    this.wb = b ? new Weights({ kinds: b.kinds }, this.w.f) : this.w;  // B: another record, or A's own
    if (!same) this.reopen(header); else if (moved) this.sel = this.fit(header.selection);
    if (!same) {
      this.perHead = null;
      this.stop();
      this.build();
    }
    this.render();
  }

  reopen(header) {  // a payload new to this explorer: where the user left it on this payload, else where the payload
    // opens, under the latest pick. Where the user left it is said to the server again: the element it was picked in
    // may have gone before the server heard its report (seen under load: the URL stayed a step behind for good).
    const last = shown.get(slot(header)), known = last && last.epoch === header.epoch;
    this.sel = this.fit({ ...(known ? last.sel : header.selection), ...(pending || {}) });
    if (known && SELECTED.some((name) => last.sel[name] !== header.selection[name])) this.schedule();
  }

  fit(s) {
    const h = this.w.h, kinds = h.kinds, kind = h.kind || (KINDS.includes(s.kind) ? s.kind : "cross");
    const layer = Math.max(0, Math.min(s.layer | 0, kinds[kind].n_layers - 1));
    const head = s.head === null || s.head === undefined || s.head >= kinds[kind].heads ? null : Math.max(0, s.head | 0);
    const step = Math.max(0, Math.min(s.step | 0, h.target.length - 1));
    return h.mode === "inside" ? this.fitQuery({ kind, layer, head, step }, s) : { kind, layer, head, step };
  }

  set(change, quiet) {
    this.sel = this.fit({ ...this.sel, ...change });
    if (!quiet) this.schedule();
    this.render();
  }

  schedule() {  // the server hears of the selection when the user pauses
    const { kind, layer, head, step, query } = this.sel;  // a map of one kind says only its layer and head
    pending = this.w.h.mode === "map" ? { ...pending, layer, head } : { kind, layer, head, step, ...(query === undefined ? {} : { query }) };
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.deliver(), SEND_MS);
  }

  fetch(layer) {  // a layer the payload lacks, asked for at once (the explorer reruns alone); the view follows later
    if (this.asked === layer) return;  // once: were the answer lost, the view's report after the pause brings it
    this.asked = layer;
    this.send("fetch", { layer, at: Date.now() });
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

  room() { return Math.max(320, this.root.clientWidth - 24); }  // room for a view, in CSS pixels

  fitCell(n, room, min, max) {
    return Math.max(min, Math.min(max, Math.floor(room / Math.max(n, 1)))) * this.zoom;
  }

  render() {
    const s = this.sel;
    shown.set(slot(this.w.h), { epoch: this.epoch, sel: s });
    Object.assign(this.root.dataset, { kind: s.kind, layer: s.layer, head: s.head === null ? "mean" : s.head, step: s.step });
    const mode = this.w.h.mode;
    if (mode === "inside") return this.renderInside();
    this.drawBar();
    if (mode === "step") this.renderStep(); else if (mode === "compare") this.renderCompare(); else this.renderHeatmap();
  }

  key(e) {
    if (this.w.h.mode === "atlas") return this.keyAtlas(e);
    const s = this.sel, H = this.w.h.kinds[s.kind].heads, kind = this.w.h.mode === "step" ? "cross" : s.kind;
    const inside = this.w.h.mode === "inside", heads = [...(inside ? [] : [null]), ...Array(H).keys()], at = heads.indexOf(s.head);
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
      "[": () => (inside ? this.set({ query: s.query - 1 }) : null),
      "]": () => (inside ? this.set({ query: s.query + 1 }) : null),
    };
    const action = moves[e.key] || (KIND_KEYS[e.key] && ["heatmap", "compare", "inside"].includes(this.w.h.mode) ? () => this.set({ kind: KIND_KEYS[e.key] }) : null);
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
  root.explorer.trigger = component.setTriggerValue;  // the atlas's "open" (a click on a point)
  if (data) root.explorer.receive(data instanceof Uint8Array ? data : new Uint8Array(data), setStateValue);
  root.explorer.arm();
  return () => root.explorer.disarm();
}
