// Part 9: Inside one head's page, sections 1-5 in order: the headline, the strips (part 8), Eq. 1's steps,
// the mask, the softmax row, the heads' slices and the logit lens at the step.

const INK = "#0b1f33";

function fmt(x, digits) { return x === -Infinity ? "−∞" : x.toFixed(digits); }

function section(parent, text) { parent.append(el("h4", "section", text)); }

Object.assign(Explorer.prototype, {
  drawInside(v) {
    const b = this.body, h = this.w.h, chosen = h.output[v.step], out = [];
    b.replaceChildren();
    if (v.mean) {
      b.append(el("div", "note", "The sidebar's head is the mean of heads, which has no single computation to open: this page " +
        "shows head 0. Pick a head here or in the sidebar to see another."));
    }
    const line = (strong, rest) => { out.push(el("strong", "", strong), document.createTextNode(rest)); };
    line(`${h.labels[v.kind]} · layer ${v.layer} · head ${v.head}`, v.mean ? " (in place of the mean of heads)" : "");
    out.push(el("br"));
    line(`Step ${v.step}:`, ` the decoder has read ${h.target.slice(0, v.step + 1).join(" ")} and chose “${chosen}”. `);
    line("Query:", ` “${v.queryTokens[v.query]}” (position ${v.query}) · ${v.keyTokens.length} keys · ${v.H} heads × d_k ${v.dh} = ` +
      `${v.concat.length} (d_model ${v.D})`);
    const headline = el("div", "headline");
    headline.append(...out);
    b.append(headline);
    section(b, "1 · Where the vectors come from");
    this.inputStrips(b, v);
    this.keyInputStrips(b, v);
    section(b, "2 · Query, keys and their dot products");
    this.qkStrips(b, v);
    this.productStrips(b, v);
    const steps = [v.scale !== 1 ? "scale" : "", v.bias ? "position bias" : "", "mask, softmax"].filter(Boolean).join(", ");
    section(b, `3 · ${steps[0].toUpperCase()}${steps.slice(1)}`);
    this.scoreSteps(b, v);
    const unscaled = v.scale === 1 ? "This model leaves out the 1/√d_k (T5 folds it into its initialisation). " : "";
    const bias = v.bias ? "The position bias is this head's learned number for the bucket of each key's offset from the query " +
      "(the Positional page draws them all). " : "";
    b.append(el("div", "caption", `${unscaled}${bias}The softmax of these terms, recomputed here, equals the weights the model ` +
      `computed (max |Δ| = ${v.recomputedGap.toExponential(1)}), and those equal the row of the attention heatmap recorded while ` +
      "translating, to float32 rounding (this page recomputes the sentence in one teacher-forced pass): " +
      `max |Δ| = ${v.gap.toExponential(1)}.`));
    const columns = el("div", "columns two");
    b.append(columns);
    this.maskMatrix(columns, v);
    this.weightBars(columns, v);
    section(b, "4 · What the head gives to the residual stream");
    this.valueStrips(b, v);
    this.headSlices(b, v);
    this.contributionStrips(b, v);
    this.residualStrips(b, v);
    section(b, `5 · Logit lens at step ${v.step}`);
    this.lensTable(b, v.step);
  },

  scoreSteps(parent, v) {  // q·k → × 1/√d_k → + position bias → mask → softmax, one row each, one column per key
    const rows = [v.dots], labels = ["q·k"];
    if (v.scale !== 1) { rows.push(v.dots.map((x) => x * v.scale)); labels.push(`× 1/√d_k = ×${v.scale.toFixed(4)}`); }
    if (v.bias) { rows.push(v.dots.map((x, j) => x * v.scale + v.bias[j])); labels.push("+ position bias b(key − query), this head's"); }
    rows.push(v.scores, v.weights);
    labels.push("+ mask (−∞: may not look)", "softmax: the weights");
    const shade = rows.map((row) => {  // each row on its own scale; the numbers are the text
      const finite = Array.from(row).filter(Number.isFinite), low = Math.min(...finite), high = Math.max(...finite);
      return (x) => (high > low ? (x - low) / (high - low) : 0);
    });
    const title = `Eq. 1: Attention(Q, K, V) = ${formulaOf(v)} V — this query's row, step by step`;
    const box = insideView(parent, "scores", title);
    new Cells(box, this.tip, "scores").draw({
      title, rows: labels, cols: numberedAll(v.keyTokens), get: (r, c) => rows[r][c], scale: () => 1, cellW: 52, cellH: 20,
      paint: (x, r) => (Number.isFinite(x) ? colour(shade[r](x)) : MASKED), text: (r, c) => fmt(rows[r][c], 3),
      ink: (r, c) => (Number.isFinite(rows[r][c]) && shade[r](rows[r][c]) > 0.55 ? "#ffffff" : INK),
      format: (x) => (Number.isFinite(x) ? `value ${x.toPrecision(7)}` : "−∞"), value: "value", rowName: "", colName: "key",
      labelMax: 300 });
  },

  maskMatrix(parent, v) {  // the mask added before the softmax, for every query; this query's row outlined
    const what = v.kind === "decoder" ? "causal mask: a position may not look at later ones (section 3.2.3)"
      : "no mask: every key is visible (no padding in one sentence)";
    const title = `Mask M added before the softmax — ${what}`, box = insideView(parent, "mask", title), m = v.maskMatrix;
    if (!m.some((row) => row.some(Boolean))) {
      box.append(el("p", "", `M is all zeros here (${m.length} queries × ${v.keyTokens.length} keys): it changes no score, so ` +
        "every key is weighed."));
      return;
    }
    const cell = Math.max(3, Math.min(26, Math.floor(720 / m.length)));  // a long sentence's mask fits its column
    new Cells(box, this.tip, "mask").draw({
      title, rows: numberedAll(v.queryTokens), cols: numberedAll(v.keyTokens), get: (r, c) => (m[r][c] ? -Infinity : 0),
      scale: () => 1, cellW: cell, cellH: Math.max(cell, 3), paint: (x) => (x === -Infinity ? [99, 99, 99] : [247, 251, 255]),
      text: (r, c) => (m[r][c] ? "−∞" : "0"), ink: (r, c) => (m[r][c] ? "#ffffff" : INK), outline: [v.query],
      format: (x) => (x === -Infinity ? "−∞ (masked)" : "0"), value: "mask", rowName: "query", colName: "key" });
  },

  weightBars(parent, v) {  // the softmax row: how much of each value this query takes, keys in order
    const sum = v.weights.reduce((a, b) => a + b, 0);
    const box = insideView(parent, "weights", `softmax row of “${v.queryTokens[v.query]}” (sums to ${sum.toFixed(4)})`);
    numberedAll(v.keyTokens).forEach((k, j) => {
      const w = v.weights[j], line = el("div", `bar-line${v.masked[j] ? " masked" : ""}`), fill = el("div", "fill");
      line.title = `${k}: weight ${w.toFixed(6)}`;
      line.dataset.value = String(w);
      fill.style.width = `${(100 * Math.min(Math.max(w, 0), 1)).toFixed(1)}%`;
      const track = el("div", "track");
      track.append(fill);
      line.append(el("span", "tok", k), track, el("span", "p", v.masked[j] ? "masked" : w.toFixed(4)));
      box.append(line);
    });
  },

  headSlices(parent, v) {  // Concat(head_1 … head_h): d_model cut into h slices of d_k, the chosen head's framed
    const n = v.concat.length, start = v.head * v.dh;
    const width = n === v.D ? `d_model ${n}` : `${n} (not d_model ${v.D}: this model's heads have their own width)`;
    const box = insideView(parent, "slices", `MultiHead = Concat(head_1, …, head_h)·W^O (section 3.2.2): ${width} = ${v.H} heads × ` +
      `d_k ${v.dh}; head ${v.head} owns dimensions ${start}…${start + v.dh - 1}`);
    const row = el("div", "hs");
    row.append(el("span", "hl", `Concat(head_0 … head_${v.H - 1}) at “${v.queryTokens[v.query]}”`));
    for (let h = 0; h < v.H; h++) {
      const part = v.concat.subarray(h * v.dh, (h + 1) * v.dh), limit = limitOf(part);
      const cell = el("span", `hb${h === v.head ? " on" : ""}`), band = el("canvas", "hg");
      band.width = part.length;
      band.height = 1;
      const image = new ImageData(part.length, 1);
      part.forEach((x, i) => image.data.set([...signed(x / limit), 255], 4 * i));
      band.getContext("2d").putImageData(image, 0, 0);
      band.title = `head ${h}: ${summary(part, h * v.dh)}`;
      cell.append(el("span", "hn", `head ${h} · ±${g3(limit)}`), band);
      row.append(cell);
    }
    box.append(row, bandLegend(`value (${n} dimensions)`, "under each head"));
  },

  lensTable(parent, step) {  // each decoder layer's prediction through the final norm and the output layer
    const h = this.w.h, top = h.lens.top[step], chosen = h.lens.chosen[step], L = top.length;
    const box = insideView(parent, "lens", `Logit lens at step ${step}: each layer's output through the final norm and the ` +
      `output layer (softmax(LayerNorm(h)·W_out)); ◆ = “${chosen}”, the token chosen`);
    const table = el("table", "lens"), probs = this.w.at("lens.top_probs", step);
    const ranks = this.w.at("lens.chosen_rank", step), chosenProbs = this.w.at("lens.chosen_prob", step);
    const head = el("tr");
    head.append(el("th"), ...top[0].map((_, j) => el("th", "", `#${j + 1}`)));
    table.append(head);
    for (let l = 0; l < L; l++) {
      const tr = el("tr");
      tr.append(el("th", "r", `layer ${l}${l === L - 1 ? " (output)" : ""} · “${chosen}” rank ${ranks[l]}, ` +
        `p=${chosenProbs[l].toFixed(3)}`));
      top[l].forEach((token, j) => {
        const p = probs[l * top[l].length + j], td = el("td", "num", `${token === chosen ? "◆ " : ""}${token}`);
        td.style.background = css(colour(p));
        td.style.color = p > 0.55 ? "#ffffff" : INK;
        td.title = `layer ${l} · #${j + 1} ${token}: probability ${p.toFixed(4)}`;
        tr.append(td);
      });
      table.append(tr);
    }
    box.append(table, legendLine("probability", BLUES, "0", "1"));
  },
});
