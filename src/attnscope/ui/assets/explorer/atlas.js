// Part 7: the head atlas (viz/atlas.py writes its payload): every head's joint map of queries and keys over a
// sample of sentences, as a layers × heads matrix of small maps of one kind, each head tagged with its group; a
// click on a small map opens that head large (part 8: pan, zoom, hover, a click on a point opens its sentence).

const ATLAS_GROUPS = { sink: [127, 127, 127], "previous-token": [214, 39, 40], positional: [255, 127, 14],
  aligning: [44, 160, 44], mixed: [31, 119, 180] };
const QUERY_RGB = [27, 158, 119], KEY_RGB = [231, 41, 138];  // queries green, keys pink, as AttentionViz
const COLOURINGS = [["qk", "query / key"], ["position", "position"], ["token", "token"]];

const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // position: start → end

function tokenRgb(token) {  // a stable colour per token string
  let h = 0;
  for (let i = 0; i < token.length; i++) h = (h * 31 + token.charCodeAt(i)) >>> 0;
  const hue = (h % 360) / 60, c = 200, x = Math.round(c * (1 - Math.abs((hue % 2) - 1)));
  return [[c, x, 0], [x, c, 0], [0, c, x], [0, x, c], [x, 0, c], [c, 0, x]][Math.floor(hue) % 6].map((v) => v + 20);
}

// One atlas payload read: points of each side, every head's coordinates, their bounds and colours.
class AtlasData {
  constructor(h, f) {
    this.h = h;
    this.f = f;
    this.bounds = new Map();
    this.colours = new Map();
  }
  kind(kind) { return this.h.kinds[kind]; }
  count(kind) { const k = this.kind(kind); return k.nq + k.nk; }
  base(kind, layer, head) { const k = this.kind(kind); return k.offset + (layer * k.heads + head) * (k.nq + k.nk) * 2; }
  point(kind, i) {  // {query, sentence, position, token, length} of point i of a kind's maps (queries first)
    const k = this.kind(kind), query = i < k.nq, side = this.h.sides[query ? k.queries : k.keys];
    const at = side.offset + 3 * (query ? i : i - k.nq), sentence = this.f[at];
    return { query, sentence, position: this.f[at + 1], token: this.h.tokens[this.f[at + 2]],
      length: side.lengths[sentence], side: query ? k.queries : k.keys };
  }
  box(kind, layer, head) {  // [minX, minY, maxX, maxY] of one head's map
    const key = `${kind}|${layer}|${head}`;
    if (this.bounds.has(key)) return this.bounds.get(key);
    const b = this.base(kind, layer, head), n = this.count(kind), f = this.f;
    const out = [Infinity, Infinity, -Infinity, -Infinity];
    for (let i = 0; i < n; i++) {
      const x = f[b + 2 * i], y = f[b + 2 * i + 1];
      if (x < out[0]) out[0] = x; if (y < out[1]) out[1] = y; if (x > out[2]) out[2] = x; if (y > out[3]) out[3] = y;
    }
    this.bounds.set(key, out);
    return out;
  }
  rgb(kind, colouring) {  // Uint8Array [n * 3]: every point's colour (the same for every head of a kind)
    const key = `${kind}|${colouring}`;
    if (this.colours.has(key)) return this.colours.get(key);
    const n = this.count(kind), out = new Uint8Array(n * 3);
    for (let i = 0; i < n; i++) {
      const p = this.point(kind, i);
      const c = colouring === "qk" ? (p.query ? QUERY_RGB : KEY_RGB)
        : colouring === "position" ? ramp(VIRIDIS, p.position / Math.max(1, p.length - 1)) : tokenRgb(p.token);
      out.set(c, 3 * i);
    }
    this.colours.set(key, out);
    return out;
  }
}

// One head's points into ImageData, each a size × size square of its colour at pixel (ax·x + bx, ay·y + by).
function plot(image, data, kind, layer, head, colours, [ax, bx, ay, by], size) {
  const b = data.base(kind, layer, head), n = data.count(kind), f = data.f, px = image.data;
  const width = image.width, height = image.height;
  for (let i = 0; i < n; i++) {
    const x0 = Math.round(ax * f[b + 2 * i] + bx), y0 = Math.round(ay * f[b + 2 * i + 1] + by);
    const r = colours[3 * i], g = colours[3 * i + 1], bl = colours[3 * i + 2];
    for (let cy = Math.max(0, y0); cy < Math.min(height, y0 + size); cy++) {
      for (let cx = Math.max(0, x0); cx < Math.min(width, x0 + size); cx++) {
        const o = 4 * (cy * width + cx);
        px[o] = r; px[o + 1] = g; px[o + 2] = bl; px[o + 3] = 255;
      }
    }
  }
}

function fitted(box, left, top, size) {  // [ax, bx, ay, by]: data -> pixels of a square map, one scale, y up
  const span = Math.max(box[2] - box[0], box[3] - box[1]) || 1, s = (size - 4) / span;
  const cx = (box[0] + box[2]) / 2, cy = (box[1] + box[3]) / 2;
  return [s, left + size / 2 - cx * s, -s, top + size / 2 + cy * s];
}

Object.assign(Explorer.prototype, {
  receiveAtlas(header, floats) {
    if (this.w && this.w.h.id === header.id) return;  // a rerun: the browser's own view stands
    this.w = { h: header };
    this.atlas = new AtlasData(header, floats);
    const s = header.selection, kinds = header.kinds, kind = KINDS.includes(s.kind) ? s.kind : "cross";
    const layer = Math.max(0, Math.min(s.layer | 0, kinds[kind].n_layers - 1));
    const head = Math.max(0, Math.min(s.head | 0, kinds[kind].heads - 1));
    this.asel = { kind, layer, head, colouring: "qk", group: null };
    this.buildAtlas();
    this.renderAtlas();
  },

  buildAtlas() {
    const r = this.root;
    r.replaceChildren();
    r.dataset.mode = "atlas";
    this.bar = el("div", "bar");
    this.legend = el("div", "bar legend");
    this.title = el("div", "title");
    this.headWrap = el("div", "atlas-head");
    this.headCanvas = el("canvas", "atlas-head");
    this.headOver = el("canvas", "atlas-over");
    this.headWrap.append(this.headCanvas, this.headOver);
    this.matrixTitle = el("div", "title");
    this.matrixScroll = el("div", "scroll grid");
    this.matrix = el("canvas", "atlas-matrix");
    this.matrixScroll.append(this.matrix);
    this.tip = el("div", "tip");
    this.matrix.addEventListener("click", (e) => {
      const at = this.matrixAt(e);
      if (at) { Object.assign(this.asel, { layer: at[0], head: at[1] }); this.view = null; this.renderAtlas("head"); }
    });
    this.bindHead();
    r.append(this.bar, this.legend, this.title, this.headWrap, this.matrixTitle, this.matrixScroll, this.tip);
  },

  renderAtlas(only) {  // only "head": the large map alone (pan, zoom, a new head); else everything
    const s = this.asel, h = this.w.h;
    Object.assign(this.root.dataset, { kind: s.kind, layer: s.layer, head: s.head, colouring: s.colouring });
    const share = h.kinds[s.kind].explained[s.layer][s.head];
    const group = h.kinds[s.kind].groups[s.layer][s.head];
    this.title.textContent = `${KIND_LABELS[s.kind]} · layer ${s.layer} · head ${s.head} · ${group}` +
      ` · the two axes hold ${(100 * share).toFixed(0)}% of the variance`;
    this.drawHead();
    if (only === "head") return this.outlineMatrix();
    this.drawAtlasBar();
    this.drawMatrix();
  },

  drawAtlasBar() {
    const s = this.asel, h = this.w.h;
    const again = (change) => { Object.assign(this.asel, change); this.view = null; this.renderAtlas(); };
    const kind = this.buttons("", KINDS.map((k) => [k, KIND_LABELS[k]]), s.kind, (k) => again({
      kind: k, layer: Math.min(s.layer, h.kinds[k].n_layers - 1), head: Math.min(s.head, h.kinds[k].heads - 1) }));
    const colour = this.buttons("Colour", COLOURINGS, s.colouring, (colouring) => again({ colouring }));
    const zoom = this.buttons("Zoom", [["in", "+"], ["out", "−"], ["fit", "fit"]], "", (z) => this.zoomHead(z));
    this.bar.replaceChildren(kind, colour, zoom);
    const groups = this.buttons("Groups", [["all", "all"], ...h.groups.map((g) => [g, g])], s.group || "all",
      (g) => { this.asel.group = g === "all" ? null : g; this.drawAtlasBar(); this.drawMatrix(); });
    for (const b of groups.querySelectorAll("button")) {
      const rgb = ATLAS_GROUPS[b.dataset.value];
      if (rgb) { b.style.borderColor = css(rgb); b.title = h.group_rules[b.dataset.value]; }
    }
    this.legend.replaceChildren(groups, el("span", "label", s.colouring === "qk" ? "queries green, keys pink"
      : s.colouring === "position" ? "position in the sentence: start dark blue … end yellow"
      : "one colour per token"));
  },

  matrixLayout() {
    const h = this.w.h, info = h.kinds[this.asel.kind], H = info.heads;
    const size = Math.max(56, Math.min(140, Math.floor((this.room() - 40) / H) - 8)), gap = 8, left = 34, top = 18;
    const L = info.n_layers;
    return { size, gap, left, top, H, L, w: left + H * (size + gap), h: top + L * (size + gap) };
  },

  drawMatrix() {
    const s = this.asel, m = this.matrixLayout(), dpr = window.devicePixelRatio || 1, c = this.matrix;
    const n = this.w.h.sentences.length;
    this.matrixTitle.textContent = `${KIND_LABELS[s.kind]}: every layer and head over ${n} sentences ` +
      "(click a map to open it; the border's colour is the head's group)";
    c.width = Math.ceil(m.w * dpr); c.height = Math.ceil(m.h * dpr);
    c.style.width = `${m.w}px`; c.style.height = `${m.h}px`;
    Object.assign(c.dataset, { left: m.left, top: m.top, size: m.size, gap: m.gap });
    const ctx = c.getContext("2d"), image = ctx.createImageData(c.width, c.height);
    const colours = this.atlas.rgb(s.kind, s.colouring);
    for (let l = 0; l < m.L; l++) for (let hd = 0; hd < m.H; hd++) {
      const x = (m.left + hd * (m.size + m.gap)) * dpr, y = (m.top + l * (m.size + m.gap)) * dpr;
      plot(image, this.atlas, s.kind, l, hd, colours, fitted(this.atlas.box(s.kind, l, hd), x, y, m.size * dpr), 1);
    }
    ctx.putImageData(image, 0, 0);
    this.matrixBase = ctx.getImageData(0, 0, c.width, c.height);
    this.outlineMatrix();
  },

  outlineMatrix() {  // labels, each head's group border (dimmed outside the chosen group), the open head outlined
    const s = this.asel, m = this.matrixLayout(), dpr = window.devicePixelRatio || 1;
    const ctx = this.matrix.getContext("2d");
    if (!this.matrixBase) return;
    ctx.putImageData(this.matrixBase, 0, 0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = "11px sans-serif";
    const text = getComputedStyle(this.root).color || "#333", groups = this.w.h.kinds[s.kind].groups;
    ctx.fillStyle = text;
    for (let hd = 0; hd < m.H; hd++) ctx.fillText(`H${hd}`, m.left + hd * (m.size + m.gap) + m.size / 2 - 8, 12);
    for (let l = 0; l < m.L; l++) {
      ctx.fillStyle = text;
      ctx.fillText(`L${l}`, 4, m.top + l * (m.size + m.gap) + m.size / 2 + 4);
      for (let hd = 0; hd < m.H; hd++) {
        const x = m.left + hd * (m.size + m.gap), y = m.top + l * (m.size + m.gap), g = groups[l][hd];
        if (s.group && g !== s.group) { ctx.fillStyle = "rgba(255,255,255,0.75)"; ctx.fillRect(x, y, m.size, m.size); }
        ctx.strokeStyle = css(ATLAS_GROUPS[g] || [0, 0, 0]);
        ctx.lineWidth = 2;
        ctx.strokeRect(x - 1, y - 1, m.size + 2, m.size + 2);
      }
    }
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 3;
    const step = m.size + m.gap;
    ctx.strokeRect(m.left + s.head * step - 4, m.top + s.layer * step - 4, m.size + 8, m.size + 8);
  },

  matrixAt(e) {  // [layer, head] under the pointer, or null between maps
    const m = this.matrixLayout(), r = this.matrix.getBoundingClientRect();
    const x = e.clientX - r.left - m.left, y = e.clientY - r.top - m.top, step = m.size + m.gap;
    const hd = Math.floor(x / step), l = Math.floor(y / step);
    if (x < 0 || y < 0 || hd >= m.H || l >= m.L || x % step > m.size || y % step > m.size) return null;
    return [l, hd];
  },
});
