// The result's timeline (Result.timeline, grader/timeline/; docs/architecture.md, "The result's
// timeline"): one SVG per launch, failing launch first, one lane per rank on the launch's clock,
// with a few sentences on what to look at and a table of the same events for screen readers and
// keyboard users. Loaded by submit.js only when a result with a timeline arrives: the lesson page
// costs nothing more. Labels come from the page's own strings (templates/submissions/_exercise.html,
// data-role="timeline-i18n"), in the learner's language. No library.
(function () {
  "use strict";
  if (window.RdvTimeline) return;

  const SVG_NS = "http://www.w3.org/2000/svg";
  const LABEL_W = 86;
  const LANE_H = 56; // a compute row (backward, steps, checkpoints) above a communication row
  const COMPUTE = [4, 20]; // y offset and height within the lane
  const COMM = [30, 16];
  // Drawn first, so the bars of the same moment stay visible on top.
  const BEHIND = { step: 0, backward: 1, save: 2, load: 2 };
  const AXIS_H = 26;
  const RIGHT = 44; // room for the last time label
  const MIN_W = 240; // the narrowest drawing at zoom 1 (labels aside): zoom 1 fits the panel
  const ZOOMS = [1, 2, 4, 8, 16];
  const KNOWN = new Set(["start", "restart", "init", "collective", "barrier", "ddp_sync", "step", "save", "load", "fault", "exception", "destroy", "backward", "ready"]);

  function fmt(template, values) {
    return String(template || "").replace(/\{(\w+)\}/g, (_, key) => (key in values ? values[key] : ""));
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "className") node.className = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function svg(tag, attrs, title) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) node.setAttribute(key, String(value));
    }
    if (title) {
      const tip = document.createElementNS(SVG_NS, "title");
      tip.textContent = title;
      node.append(tip);
    }
    return node;
  }

  function seconds(ms) {
    return (Math.round(ms) / 1000).toFixed(ms >= 10000 ? 1 : 2);
  }

  function size(bytes, t) {
    if (bytes == null) return "";
    if (bytes >= 1048576) return fmt(t.mib, { n: (bytes / 1048576).toFixed(1) });
    if (bytes >= 1024) return fmt(t.kib, { n: (bytes / 1024).toFixed(1) });
    return fmt(t.bytes, { n: bytes });
  }

  // What an item is, in words: its kind, what it carried, its line (hover title and table).
  function describe(item, t, params) {
    const parts = [];
    if (item.kind === "collective") parts.push(item.op + (item.bytes != null ? ", " + size(item.bytes, t) : ""));
    else if (item.kind === "ready") parts.push(fmt(t.kind_ready, { param: (params && params[item.param]) || "#" + item.param }));
    else if (item.kind === "ddp_sync") parts.push(t.kind_ddp_sync + (item.bytes != null ? ", " + size(item.bytes, t) : ""));
    else if (item.kind === "step") parts.push(fmt(t.kind_step, { n: item.n ?? "" }));
    else if (item.kind === "save" || item.kind === "load") parts.push(t["kind_" + item.kind] + (item.path ? " " + item.path : "") + (item.ok === false ? " (" + t.failed + ")" : ""));
    else if (item.kind === "exception") parts.push(t.kind_exception + (item.error ? ": " + item.error : ""));
    else parts.push(t["kind_" + item.kind] || item.kind);
    if (item.waited) parts.push(fmt(t.waited_at, { line: item.wait_line ?? "?" }));
    if (item.open) parts.push(t.never_completed);
    if (item.parted) parts.push(t.parted_here);
    if (item.attempt) parts.push(fmt(t.attempt, { n: item.attempt }));
    return parts.join("; ");
  }

  function when(item, t) {
    const start = fmt(t.at_s, { s: seconds(item.at || 0) });
    return item.to != null && item.to > item.at ? start + " – " + fmt(t.at_s, { s: seconds(item.to) }) : start;
  }

  function endText(end, t) {
    if (!end) return "";
    let text = t["end_" + end.state] || end.state;
    if (end.line != null) text += " " + fmt(t.at_line, { line: end.line });
    if (end.never_arrived) text += "; " + fmt(t.never_arrived, { n: end.never_arrived });
    return text;
  }

  function launchTitle(launch, t) {
    const what = launch.nnodes > 1
      ? fmt(t.nodes, { nodes: launch.nnodes, size: launch.world_size })
      : fmt(launch.world_size === 1 ? t.one_process : t.processes, { size: launch.world_size });
    let title = fmt(t.launch, { index: launch.launch, what });
    if (launch.role === "reference") title += " " + t.reference;
    else if (launch.faulted) title += " " + t.faulted;
    if (launch.failing) title += " " + t.failing;
    return title;
  }

  // Sentences that say what the picture teaches: the overlap (or its absence), where the ranks
  // parted, the kill and the restart.
  function notes(launch, t) {
    const found = [];
    const lanes = launch.lanes || [];
    let inside = 0;
    let total = 0;
    let backwards = 0;
    for (const lane of lanes) {
      const spans = lane.items.filter((item) => item.kind === "backward");
      backwards += spans.length;
      if (!spans.length) continue;
      // Only the steps the overlap hook followed: from the first backward pass to the end of
      // the optimizer step after the last one.
      const from = Math.min(...spans.map((span) => span.at));
      const last = Math.max(...spans.map((span) => span.to));
      const step = lane.items.find((item) => item.kind === "step" && item.at >= last);
      const until = step ? (step.to ?? step.at) : last;
      for (const item of lane.items) {
        if (item.kind !== "collective" || item.op !== "all_reduce" || item.at < from || item.at > until) continue;
        total += 1;
        if (spans.some((span) => item.at >= span.at && item.at < span.to)) inside += 1;
      }
    }
    if (backwards) found.push(total ? fmt(inside ? t.note_overlap : t.note_no_overlap, { inside, total }) : t.note_no_allreduce);
    const parted = launch.parted;
    if (parted) {
      const calls = (parted.calls || [{ rank: parted.made.join(", "), op: parted.op, line: parted.line }])
        .map((call) => fmt(t.parted_call, { rank: call.rank, op: call.op === "ddp" ? t.kind_ddp_sync : call.op, line: call.line ?? "?" }));
      found.push(fmt(t.note_parted, { n: parted.n, calls: calls.join("; ") }) +
        (parted.missing.length ? " " + fmt(t.note_missing, { ranks: parted.missing.join(", ") }) : ""));
    }
    for (const lane of lanes) {
      const fault = lane.items.find((item) => item.kind === "fault");
      if (fault) found.push(fmt(t.note_fault, { rank: lane.rank, s: seconds(fault.at) }));
    }
    const restart = lanes.flatMap((lane) => lane.items.filter((item) => item.kind === "restart")).sort((a, b) => a.at - b.at)[0];
    if (restart) {
      found.push(fmt(t.note_restart, { s: seconds(restart.at) }));
      for (const lane of lanes) {
        const load = lane.items.find((item) => item.kind === "load" && item.attempt);
        if (load) found.push(fmt(t.note_load, { rank: lane.rank, path: load.path || "?", s: seconds(load.at), line: load.line ?? "?" }));
      }
    }
    return found;
  }

  function tickStep(duration) {
    const raw = Math.max(duration, 1) / 6;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * power) return m * power;
    return 10 * power;
  }

  // Bars are at least 2 px wide (a collective of a few microseconds still shows).
  function bar(group, x, y, w, h, cls, title, data) {
    const rect = svg("rect", { x, y, width: Math.max(2, w), height: h, class: cls, ...data }, title);
    group.append(rect);
    return rect;
  }

  function drawLane(group, lane, y, scale, duration, t, params) {
    const x = (ms) => LABEL_W + (ms || 0) * scale;
    const mid = y + LANE_H / 2;
    group.append(svg("line", { x1: LABEL_W, x2: x(duration), y1: y + LANE_H, y2: y + LANE_H, class: "tl-grid" }));
    const label = fmt(lane.node ? t.rank_node : t.rank, { n: lane.rank, node: lane.node });
    const text = svg("text", { x: 4, y: mid + 4, class: "tl-label" + (lane.end && lane.end.never_arrived ? " tl-label--missing" : "") });
    text.textContent = label;
    group.append(text);
    const ordered = lane.items.filter((item) => KNOWN.has(item.kind))
      .sort((a, b) => (BEHIND[a.kind] ?? 9) - (BEHIND[b.kind] ?? 9));
    for (const item of ordered) {
      const title = `${label}, ${when(item, t)}: ${describe(item, t, params)}` + (item.line != null ? ", " + fmt(t.at_line, { line: item.line }) : "");
      const data = { "data-kind": item.kind, "data-rank": lane.rank };
      const w = ((item.to ?? item.at) - item.at) * scale;
      const top = y + COMPUTE[0];
      const comm = y + COMM[0];
      if (item.kind === "step") bar(group, x(item.at), top, w, COMPUTE[1], "tl-step", title, data);
      else if (item.kind === "backward") bar(group, x(item.at), top, w, COMPUTE[1], "tl-backward", title, data);
      else if (item.kind === "ready") group.append(svg("line", { x1: x(item.at), x2: x(item.at), y1: top, y2: top + COMPUTE[1], class: "tl-ready", ...data }, title));
      else if (item.kind === "collective" || item.kind === "barrier") {
        const end = item.open ? duration : (item.to ?? item.at);
        const cls = "tl-" + item.kind + (item.open ? " tl-open" : "") + (item.parted ? " tl-parted" : "");
        bar(group, x(item.at), comm, (end - item.at) * scale, COMM[1], cls, title, { ...data, "data-parted": item.parted ? "true" : null, "data-open": item.open ? "true" : null });
      } else if (item.kind === "save" || item.kind === "load") bar(group, x(item.at), top + 4, w, COMPUTE[1] - 8, "tl-" + item.kind, title, data);
      else if (item.kind === "ddp_sync") group.append(svg("path", { d: `M${x(item.at)} ${comm}l6 8l-6 8l-6 -8z`, class: "tl-ddp" + (item.parted ? " tl-parted" : ""), ...data, "data-parted": item.parted ? "true" : null }, title));
      else if (item.kind === "fault" || item.kind === "exception") group.append(svg("path", { d: `M${x(item.at) - 6} ${mid - 6}l12 12m0 -12l-12 12`, class: "tl-fault", ...data }, title));
      else if (item.kind === "restart") group.append(svg("line", { x1: x(item.at), x2: x(item.at), y1: y, y2: y + LANE_H, class: "tl-restart", ...data }, title));
      else group.append(svg("line", { x1: x(item.at), x2: x(item.at), y1: y + LANE_H - 10, y2: y + LANE_H, class: "tl-mark", ...data }, title));
    }
    if (lane.end && lane.end.at != null) {
      const cls = "tl-end tl-end--" + lane.end.state;
      group.append(svg("circle", { cx: x(lane.end.at), cy: mid, r: 5, class: cls, "data-end": lane.end.state }, `${label}: ${endText(lane.end, t)}`));
    }
  }

  function drawLaunch(launch, zoom, fit, t) {
    const duration = Math.max(1, launch.duration_ms || 1);
    const scale = (fit * zoom) / duration;
    const lanes = launch.lanes || [];
    const width = LABEL_W + fit * zoom + RIGHT;
    const height = AXIS_H + lanes.length * LANE_H + 4;
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", class: "tl-svg", "aria-label": launchTitle(launch, t) });
    const step = tickStep(duration);
    for (let ms = 0; ms <= duration + 0.001; ms += step) {
      const x = LABEL_W + ms * scale;
      root.append(svg("line", { x1: x, x2: x, y1: AXIS_H - 6, y2: height, class: "tl-tick" }));
      const label = svg("text", { x: x + 2, y: AXIS_H - 10, class: "tl-axis" });
      label.textContent = fmt(t.at_s, { s: seconds(ms) });
      root.append(label);
    }
    lanes.forEach((lane, index) => drawLane(root, lane, AXIS_H + index * LANE_H, scale, duration, t, launch.params));
    return root;
  }

  function table(launch, t) {
    const rows = [];
    for (const lane of launch.lanes || []) {
      for (const item of lane.items) {
        if (!KNOWN.has(item.kind)) continue;
        rows.push([item.at || 0, lane.rank, when(item, t), describe(item, t, launch.params), item.line ?? ""]);
      }
      for (const left of lane.omitted || []) {
        const counts = Object.entries(left.counts || {}).map(([kind, n]) => `${n} × ${t["kind_" + kind] || kind}`).join(", ");
        const text = left.from_step != null ? fmt(t.omitted_steps, { first: left.from_step, last: left.to_step, counts }) : fmt(t.omitted, { counts });
        rows.push([Infinity, lane.rank, "", text, ""]);
      }
      rows.push([Infinity, lane.rank, lane.end && lane.end.at != null ? fmt(t.at_s, { s: seconds(lane.end.at) }) : "", endText(lane.end, t), lane.end && lane.end.line != null ? lane.end.line : ""]);
    }
    rows.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const body = el("tbody");
    for (const [, rank, time, what, line] of rows) {
      body.append(el("tr", {}, el("td", { text: String(rank) }), el("td", { text: time }), el("td", { text: what }), el("td", { text: String(line) })));
    }
    return el("table", { className: "tl-table" },
      el("caption", { text: fmt(t.table_caption, { title: launchTitle(launch, t) }) }),
      el("thead", {}, el("tr", {},
        el("th", { scope: "col", text: t.col_rank }),
        el("th", { scope: "col", text: t.col_time }),
        el("th", { scope: "col", text: t.col_what }),
        el("th", { scope: "col", text: t.col_line }))),
      body);
  }

  // The legend of the kinds the timeline shows ("open": a collective that never completed).
  function legend(timeline, t) {
    const shown = new Set();
    for (const launch of timeline.launches) {
      for (const lane of launch.lanes || []) {
        for (const item of lane.items) shown.add(item.open ? "open" : item.kind === "exception" ? "fault" : item.kind);
      }
    }
    const list = el("ul", { className: "tl-legend" });
    for (const kind of ["collective", "barrier", "backward", "ready", "step", "save", "load", "ddp_sync", "restart", "fault", "open"]) {
      if (!shown.has(kind)) continue;
      list.append(el("li", {}, el("span", { className: "tl-swatch tl-swatch--" + kind, "aria-hidden": "true" }), kind === "open" ? t.never_completed : (t["legend_" + kind] || t["kind_" + kind] || kind)));
    }
    return list;
  }

  function figure(launch, t, index, timeline, fit) {
    let zoom = 1;
    const scroller = el("div", { className: "tl-scroll", tabindex: "0", role: "region", "aria-label": fmt(t.scroll_label, { title: launchTitle(launch, t) }) });
    const draw = () => scroller.replaceChildren(drawLaunch(launch, zoom, fit, t));
    const out = el("button", { type: "button", className: "button--secondary tl-zoom", "data-zoom": "out", text: "−", "aria-label": t.zoom_out });
    const inn = el("button", { type: "button", className: "button--secondary tl-zoom", "data-zoom": "in", text: "+", "aria-label": t.zoom_in });
    const zoomTo = (next) => {
      const centre = (scroller.scrollLeft + scroller.clientWidth / 2) / Math.max(1, scroller.scrollWidth);
      zoom = next;
      draw();
      scroller.scrollLeft = centre * scroller.scrollWidth - scroller.clientWidth / 2;
      out.disabled = zoom === ZOOMS[0];
      inn.disabled = zoom === ZOOMS[ZOOMS.length - 1];
    };
    out.addEventListener("click", () => zoomTo(ZOOMS[Math.max(0, ZOOMS.indexOf(zoom) - 1)]));
    inn.addEventListener("click", () => zoomTo(ZOOMS[Math.min(ZOOMS.length - 1, ZOOMS.indexOf(zoom) + 1)]));
    out.disabled = true;
    draw();
    const said = notes(launch, t);
    return el("figure", { className: "tl-figure" + (launch.failing ? " tl-figure--failing" : ""), "data-launch": launch.launch },
      el("figcaption", { className: "tl-caption" }, el("strong", { text: launchTitle(launch, t) })),
      said.length ? el("ul", { className: "tl-notes" }, ...said.map((text) => el("li", { text }))) : null,
      el("div", { className: "tl-tools" }, out, inn),
      scroller,
      index === 0 ? legend(timeline, t) : null,
      el("details", { className: "tl-details" }, el("summary", { text: t.table_summary }), table(launch, t)));
  }

  // Fill `box` (the result panel's timeline section) with `timeline`, or hide it.
  function show(box, timeline) {
    if (!box) return;
    const body = box.querySelector('[data-role="timeline-body"]');
    const strings = box.querySelector('[data-role="timeline-i18n"]');
    body.replaceChildren();
    const launches = (timeline && timeline.version === 1 && timeline.launches) || [];
    box.hidden = launches.length === 0;
    if (!launches.length || !strings) return;
    const t = JSON.parse(strings.textContent);
    // Zoom 1 fits the panel's width (the figure's border and padding, the labels aside), so
    // text keeps its size on a phone; zooming in scrolls sideways inside the panel.
    const fit = Math.max(MIN_W, Math.min(1200, body.clientWidth - LABEL_W - RIGHT - 24));
    launches.forEach((launch, index) => body.append(figure(launch, t, index, timeline, fit)));
  }

  window.RdvTimeline = { show, notes, describe };
})();
