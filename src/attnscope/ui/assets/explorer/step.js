// Part 5: step mode: one decoding step at a time, Prev / Next / Play, the step's rows of every head.
Object.assign(Explorer.prototype, {
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
  },

  move(delta) { this.set({ step: this.sel.step + delta }); },

  toggle() {
    if (this.playing) return this.stop(true);
    if (this.sel.step >= this.w.h.target.length - 1) this.set({ step: 0 }, true);
    this.playing = setInterval(() => {
      if (this.sel.step >= this.w.h.target.length - 1) return this.stop(true);
      this.set({ step: this.sel.step + 1 }, true);
    }, PLAY_MS);
    this.render();
  },

  stop(send) {
    if (!this.playing) return;
    clearInterval(this.playing);
    this.playing = null;
    if (this.play) this.render();
    if (send) this.schedule();
  },

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
  },

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
      return this.fetch(s.layer);
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
  },
});
