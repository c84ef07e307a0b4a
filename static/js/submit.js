// The exercise editor and submit flow (templates/submissions/_exercise.html).
// Draft: kept in localStorage on every change and, when signed in, on the server through the
// reference client (rdv-client.js: PUT /api/v1/drafts/<exercise> with the server version it was
// edited from); offline it waits on the device, and when another device saved meanwhile the
// learner chooses: keep mine, take theirs, or see both. Never a silent overwrite; offline, Submit
// says it needs the network. Submit: POST /api/v1/submissions with an Idempotency-Key, then
// live Server-Sent Events (the browser's EventSource resumes with Last-Event-ID on its own).
(function () {
  "use strict";
  if (window.RdvSubmit) return; // the partial is included once per exercise
  window.RdvSubmit = { version: 1 };

  const API = "/api/v1";
  // Results and live events in the page's language, whatever the code was submitted in.
  const LOCALE = "locale=" + encodeURIComponent(document.documentElement.lang || "en");
  const SVG_NS = "http://www.w3.org/2000/svg";
  const RANK_COLOURS = ["#0b5cad", "#e36209", "#116329", "#8250df", "#bf3989", "#1b7c83", "#9a6700", "#57606a"];
  const OVERLAP_COLOUR = "url(#rdv-overlap)";
  const UNSEEN_COLOUR = "#eaeef2";
  // After this long without a line from any rank, say what ranks usually wait for.
  const QUIET_MS = 10000;

  function fmt(template, values) {
    return String(template).replace(/\{(\w+)\}/g, (_, key) => (key in values ? values[key] : ""));
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

  // Messages and hints mark code with backticks: show those parts as <code>, the rest as text.
  function withCode(text) {
    const fragment = document.createDocumentFragment();
    String(text).split("`").forEach((part, index) => {
      if (part) fragment.append(index % 2 ? el("code", { text: part }) : document.createTextNode(part));
    });
    return fragment;
  }

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function csrfToken(root) {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return root.dataset.csrf || (meta ? meta.content : "");
  }

  async function api(root, method, path, body, extraHeaders) {
    const headers = { Accept: "application/json", ...(extraHeaders || {}) };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET") headers["X-CSRF-Token"] = csrfToken(root);
    const response = await fetch(API + path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    if (response.status !== 204) {
      try { data = await response.json(); } catch (_) { data = null; }
    }
    return { ok: response.ok, status: response.status, data };
  }

  class Exercise {
    constructor(root) {
      this.root = root;
      this.exercise = root.dataset.exercise;
      this.signedIn = root.dataset.signedIn === "true";
      this.t = JSON.parse(root.querySelector('[data-role="i18n"]').textContent);
      this.starter = JSON.parse(root.querySelector('[data-role="starter"]').textContent);
      this.storageKey = "rdv:draft:" + this.exercise;
      this.$ = (role) => root.querySelector(`[data-role="${role}"]`);
      this.submitButton = this.$("submit");
      this.panes = new Map();
      this.launchNodes = new Map();
      this.source = null;
      this.saveTimer = null;
      this.running = false;
    }

    async init() {
      const local = this.readLocal();
      this.mountEditor(local ? local.code : this.starter);
      this.submitButton.addEventListener("click", () => this.submit());
      this.$("reset").addEventListener("click", () => this.reset());
      this.$("keep-mine").addEventListener("click", () => this.keepMine());
      this.$("take-theirs").addEventListener("click", () => this.takeTheirs());
      this.$("see-both").addEventListener("click", () => this.seeBoth());
      window.addEventListener("offline", () => this.showConnection());
      window.addEventListener("online", () => {
        this.showConnection();
        const mine = this.readLocal();
        if (this.signedIn && mine && mine.dirty) this.saveServerDraft(mine.code);
      });
      this.showConnection();
      if (!this.signedIn) return;
      await this.loadServerDraft(local);
      if (navigator.onLine) await this.resumeLatest();
    }

    // Submitting needs the network: offline, the button says so (the draft stays on the device).
    showConnection() {
      if (this.running) return;
      const offline = !navigator.onLine;
      this.submitButton.textContent = offline ? this.t.submit_offline : this.t.submit;
      this.submitButton.setAttribute("aria-disabled", offline ? "true" : "false");
      if (offline) this.status(this.t.offline);
      else if (this.$("status").textContent === this.t.offline) this.status("");
    }

    // ---- editor and drafts ------------------------------------------------------------
    mountEditor(code) {
      const fallback = this.$("fallback");
      fallback.value = code;
      if (!window.RdvEditor || !window.RdvEditor.createEditor) {
        // No bundle: the plain textarea is the editor.
        fallback.addEventListener("input", () => this.changed(fallback.value));
        this.editor = { getValue: () => fallback.value, setValue: (v) => { fallback.value = v; } };
        return;
      }
      const label = this.root.querySelector(`label[for="${fallback.id}"]`);
      const host = el("div", { className: "sub__cm" });
      fallback.after(host);
      fallback.hidden = true;
      this.editor = window.RdvEditor.createEditor(host, {
        doc: code,
        label: label ? label.textContent.trim() : "main.py",
        onChange: (value) => this.changed(value),
        nonce: (document.querySelector('meta[name="csp-nonce"]') || {}).content,
      });
      const content = host.querySelector(".cm-content");
      if (content) {
        content.setAttribute("aria-describedby", fallback.getAttribute("aria-describedby"));
        // The editable area is the scroll area's keyboard stop (it is already in the tab
        // order; saying so lets checkers see the scroller can be reached by keyboard).
        content.setAttribute("tabindex", "0");
      }
    }

    // "rank N, line L" in a result: put the cursor on line L of the editor and show it. The
    // cursor is collapsed at the line's start (the active-line highlight marks the line): with
    // the line selected, Escape would only collapse the selection and the Tab after it would
    // indent the line instead of leaving the editor, as the page's keyboard hint promises.
    goToLine(number) {
      const view = this.editor && this.editor.view;
      if (view) {
        const line = view.state.doc.line(Math.min(Math.max(1, number), view.state.doc.lines));
        view.dispatch({ selection: { anchor: line.from }, scrollIntoView: true });
        view.focus();
        return;
      }
      const area = this.$("fallback");
      const lines = area.value.split("\n");
      const index = Math.min(Math.max(1, number), lines.length) - 1;
      const start = lines.slice(0, index).reduce((sum, text) => sum + text.length + 1, 0);
      area.focus();
      area.setSelectionRange(start, start);
    }

    readLocal() {
      try {
        const raw = localStorage.getItem(this.storageKey);
        return raw ? JSON.parse(raw) : null;
      } catch (_) {
        return null;
      }
    }

    // The device's copy: {code, savedAt, base (the server's updated_at it was edited from),
    // dirty (edits the server has not had yet)}.
    writeLocal(record) {
      try {
        localStorage.setItem(this.storageKey, JSON.stringify({ ...(this.readLocal() || {}), ...record }));
        return true;
      } catch (_) {
        return false; // private mode or full: the server copy still works
      }
    }

    changed(code) {
      if (this.settingFromServer) return;
      if (this.writeLocal({ code, savedAt: Date.now(), dirty: true })) {
        this.$("draft").textContent = this.t.draft_saved_local;
      }
      if (!this.signedIn || this.conflict) return;
      clearTimeout(this.saveTimer);
      this.saveTimer = setTimeout(() => this.saveServerDraft(code), 800);
    }

    // The editor shows the server's version: not an edit of the learner's.
    setFromServer(draft) {
      this.settingFromServer = true;
      try {
        if (draft.code !== this.editor.getValue()) this.editor.setValue(draft.code);
      } finally {
        this.settingFromServer = false;
      }
      this.writeLocal({ code: draft.code, savedAt: Date.now(), base: draft.updated_at, dirty: false });
    }

    async saveServerDraft(code) {
      const local = this.readLocal() || {};
      if (!local.base) {
        // Never synced from this device: a draft another device saved meanwhile is a conflict.
        const theirs = await window.RdvClient.loadDraft(this.exercise);
        if (theirs && theirs.offline) {
          this.$("draft").textContent = this.t.draft_saved_offline;
          return;
        }
        if (theirs && theirs.code !== code) {
          this.showConflict(theirs);
          return;
        }
      }
      const saved = await window.RdvClient.saveDraft(this.exercise, code, local.base);
      if (saved.status === "saved") {
        const current = this.readLocal() || {};
        this.writeLocal({ base: saved.draft.updated_at, dirty: current.code !== code });
        this.$("draft").textContent = this.t.draft_saved;
      } else if (saved.status === "offline") {
        this.$("draft").textContent = this.t.draft_saved_offline;
      } else if (saved.status === "conflict") {
        // Both versions: the editor keeps mine, the conflict box shows theirs (from the 409).
        const theirs = saved.theirs || (await window.RdvClient.loadDraft(this.exercise));
        if (theirs && !theirs.offline) this.showConflict(theirs);
      }
    }

    async loadServerDraft(local) {
      const theirs = await window.RdvClient.loadDraft(this.exercise);
      if (theirs && theirs.offline) {
        if (local && local.dirty) this.$("draft").textContent = this.t.draft_saved_offline;
        return;
      }
      const mine = local && local.dirty ? local : null;
      if (!theirs) {
        if (mine) await this.saveServerDraft(mine.code);
        return;
      }
      if (!mine || mine.code === theirs.code) this.setFromServer(theirs);
      else if (mine.base && mine.base === theirs.updated_at) await this.saveServerDraft(mine.code);
      else this.showConflict(theirs);
    }

    showConflict(theirs) {
      this.conflict = theirs;
      clearTimeout(this.saveTimer);
      this.$("theirs").textContent = theirs.code;
      this.$("theirs-box").hidden = true;
      this.$("see-both").setAttribute("aria-expanded", "false");
      this.$("conflict").hidden = false;
    }

    closeConflict() {
      this.conflict = null;
      this.$("conflict").hidden = true;
    }

    async keepMine() {
      const theirs = this.conflict;
      this.closeConflict();
      this.writeLocal({ base: theirs.updated_at, dirty: true });
      await this.saveServerDraft(this.editor.getValue());
    }

    takeTheirs() {
      const theirs = this.conflict;
      this.closeConflict();
      this.setFromServer(theirs);
      this.$("draft").textContent = this.t.draft_saved;
    }

    seeBoth() {
      const box = this.$("theirs-box");
      box.hidden = !box.hidden;
      this.$("see-both").setAttribute("aria-expanded", box.hidden ? "false" : "true");
    }

    async reset() {
      if (this.editor.getValue() !== this.starter && !window.confirm(this.t.reset_confirm)) return;
      this.editor.setValue(this.starter);
      try { localStorage.removeItem(this.storageKey); } catch (_) { /* ignore */ }
      this.$("draft").textContent = "";
      if (this.signedIn) {
        clearTimeout(this.saveTimer);
        try { await api(this.root, "DELETE", "/drafts/" + this.exercise); } catch (_) { /* offline */ }
      }
    }

    // ---- submit and live progress ------------------------------------------------------
    setRunning(running) {
      this.running = running;
      this.submitButton.disabled = running;
      this.submitButton.setAttribute("aria-disabled", running ? "true" : "false");
      this.root.classList.toggle("sub--running", running);
    }

    status(text) { this.$("status").textContent = text || ""; }

    // After Submit, the status line and the timer in view for the whole run (until the verdict
    // takes the focus): on a phone they sat below the fold, under the sticky Previous/Next bar.
    keepProgressInView() {
      const box = this.$("status").closest(".sub__progress") || this.$("status");
      const bar = document.querySelector(".step-nav");
      const sticky = bar && getComputedStyle(bar).position === "sticky";
      // Room below for the timer, which shows a moment later (on a phone, on a line of its own).
      const bottom = (sticky ? bar.getBoundingClientRect().top : window.innerHeight) - 40;
      const rect = box.getBoundingClientRect();
      if (rect.top < 8) window.scrollBy({ top: rect.top - 8, behavior: "auto" });
      else if (rect.bottom > bottom) window.scrollBy({ top: rect.bottom - bottom, behavior: "auto" });
    }

    // The elapsed time since Submit, once a second (not announced: the stage line is).
    startTimer(since) {
      this.stopTimer();
      this.startedAt = since || Date.now();
      const timer = this.$("timer");
      this.heardAt = Date.now();
      const tick = () => {
        const seconds = Math.max(0, Math.floor((Date.now() - this.startedAt) / 1000));
        timer.textContent = fmt(this.t.elapsed, { time: `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}` });
        // A launch running with no line from any rank for a while: say what ranks wait for.
        this.$("quiet").hidden = !(this.launched && Date.now() - this.heardAt >= QUIET_MS);
      };
      tick();
      timer.hidden = false;
      this.timer = setInterval(tick, 1000);
    }

    stopTimer() {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      this.$("quiet").hidden = true;
    }

    // "Launch 2 of 2: 1 process, again with 1 process to catch a hard-coded 2."
    launchText(data) {
      const size = data.nnodes > 1
        ? fmt(this.t.launch_nodes, { nodes: data.nnodes, size: data.world_size })
        : fmt(data.world_size === 1 ? this.t.launch_one : this.t.launch_many, { size: data.world_size });
      const why = this.t["why_" + data.reason_id];
      const before = data.previous_world_size;
      const previous = before ? fmt(before === 1 ? this.t.launch_one : this.t.launch_many, { size: before }) : "";
      const reason = why ? fmt(why, { size: data.world_size, first: data.first_world_size, nodes: data.nnodes, previous }) : (data.reason || "");
      return fmt(this.t.launch, { index: data.index, count: data.count, size, reason });
    }

    error(text) {
      const box = this.$("error");
      box.textContent = text || "";
      box.hidden = !text;
    }

    async submit() {
      if (this.running) return; // a second click while the first is in flight does nothing
      this.error("");
      if (!navigator.onLine) {
        this.error(this.t.offline);
        return;
      }
      if (!this.signedIn) {
        this.error(this.t.signin_needed);
        return;
      }
      this.setRunning(true);
      this.status(this.t.submitting);
      this.keepProgressInView();
      const key = newKey();
      let answer;
      try {
        answer = await api(
          this.root, "POST", "/submissions",
          { exercise: this.exercise, code: this.editor.getValue() },
          { "Idempotency-Key": key },
        );
      } catch (_) {
        this.setRunning(false);
        this.status("");
        this.error(this.t.network);
        return;
      }
      if (!answer.ok) {
        this.setRunning(false);
        this.status("");
        this.error((answer.data && answer.data.message) || this.t.network);
        return;
      }
      this.clearRun();
      this.startTimer();
      this.follow(answer.data.id);
    }

    async resumeLatest() {
      const latest = await api(this.root, "GET", "/submissions?limit=1&exercise=" + encodeURIComponent(this.exercise));
      const row = latest.ok && latest.data && latest.data.submissions[0];
      if (!row) return;
      if (row.status === "queued" || row.status === "running") {
        this.setRunning(true);
        this.startTimer(Date.parse(row.created_at) || Date.now());
        this.follow(row.id);
        return;
      }
      this.submissionId = row.id;
      const full = await api(this.root, "GET", `/submissions/${row.id}?${LOCALE}`);
      if (full.ok && full.data.result) this.showResult(full.data.status, full.data.result, false);
    }

    clearRun() {
      this.panes.clear();
      this.launches = new Map();
      this.launchNodes = new Map();
      this.launched = false;
      this.$("ranks").replaceChildren();
      this.$("output").hidden = true;
      this.$("checks").replaceChildren();
      this.$("results").hidden = true;
      this.$("sampler").hidden = true;
      this.$("stacks").hidden = true;
      this.$("next").hidden = true;
    }

    follow(id) {
      this.submissionId = id;
      if (this.source) this.source.close();
      const source = new EventSource(`${API}/submissions/${id}/events?${LOCALE}`);
      this.source = source;
      const on = (name, handler) =>
        source.addEventListener(name, (event) => handler(JSON.parse(event.data)));
      on("queued", (data) => this.status(fmt(this.t.queued, { n: data.position })));
      on("status", (data) => {
        if (data.status === "retrying") {
          this.clearRun();
          this.status(this.t.retrying);
        } else if (data.status === "launch") {
          const text = this.launchText(data);
          this.status(text);
          this.launchGroup(data.index, text);
          this.launchNodes.set(data.index, data.nnodes || 1);
          this.launched = true;
          this.heardAt = Date.now();
        } else if (this.t[data.status]) {
          this.status(this.t[data.status]);
        }
      });
      on("output", (data) => this.appendLine(data.rank, data.line, data.world_size, data.launch));
      on("check", (data) => { this.$("results").hidden = false; this.addCheck(data, true); });
      on("done", (data) => {
        source.close();
        this.source = null;
        this.showResult(data.status, data.result, true);
      });
      source.onerror = () => {
        // EventSource reconnects by itself (sending Last-Event-ID); only a closed one needs us.
        if (source.readyState === EventSource.CLOSED && this.source === source) this.poll(id);
      };
    }

    async poll(id) {
      const read = await api(this.root, "GET", `/submissions/${id}?${LOCALE}`).catch(() => null);
      if (read && read.ok && read.data.result) {
        this.showResult(read.data.status, read.data.result, true);
        return;
      }
      setTimeout(() => this.follow(id), 2000);
    }

    // Each launch's heading ("Launch 2 of 3: ... why") and, under it, that launch's panes.
    launchGroup(index, text) {
      if (!this.launches) this.launches = new Map();
      if (this.launches.has(index)) return this.launches.get(index);
      const group = el("div", { className: "sub__launch-group", "data-launch": index },
        text ? el("p", { className: "sub__launch", text }) : null);
      this.$("ranks").append(group);
      this.launches.set(index, group);
      return group;
    }

    // One pane per rank and per launch: an exercise may launch several times, at one world
    // size or several (the restarted run and its reference, a 2-node job). Events stored
    // before they carried their launch are keyed by world size, as they were.
    pane(rank, worldSize, launch) {
      const key = launch ? `L${launch}:${rank}` : `${worldSize || ""}:${rank}`;
      if (this.panes.has(key)) return this.panes.get(key);
      const title = this.paneTitle(rank, worldSize, launch);
      const pre = el("pre", { className: "sub__log", tabindex: "0", role: "log", "aria-label": title });
      const section = el(
        "section",
        { className: "sub__rank", "data-rank": rank, "data-world-size": worldSize || "", "data-launch": launch || "" },
        el("h5", { text: title }),
        pre,
      );
      (launch ? this.launchGroup(launch, "") : this.$("ranks")).append(section);
      this.$("output").hidden = false;
      this.panes.set(key, pre);
      return pre;
    }

    // "Rank 1 of 2", or in a job on several machines "Rank 1 of 2 on node 1 (LOCAL_RANK 0)":
    // torchrun's nodes take the ranks in blocks of nproc_per_node, numbered from 0.
    paneTitle(rank, worldSize, launch) {
      if (!worldSize) return fmt(this.t.rank, { n: rank });
      const nodes = (launch && this.launchNodes && this.launchNodes.get(launch)) || 1;
      if (nodes > 1 && worldSize % nodes === 0) {
        const perNode = worldSize / nodes;
        return fmt(this.t.rank_on_node, {
          n: rank, size: worldSize, node: Math.floor(rank / perNode), local: rank % perNode,
        });
      }
      return fmt(this.t.rank_of_run, { n: rank, size: worldSize });
    }

    // The pane of `rank` in the last launch at `worldSize` (the Result speaks for that run).
    lastPane(rank, worldSize) {
      let found = null;
      for (const pre of this.panes.values()) {
        const section = pre.parentElement;
        if (section.dataset.rank === String(rank) && section.dataset.worldSize === String(worldSize || "")) found = pre;
      }
      return found;
    }

    appendLine(rank, line, worldSize, launch) {
      this.heardAt = Date.now();
      this.$("quiet").hidden = true;
      const pre = this.pane(rank ?? 0, worldSize, launch);
      const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(document.createTextNode(line.endsWith("\n") ? line : line + "\n"));
      if (stick) pre.scrollTop = pre.scrollHeight;
    }

    // ---- results -----------------------------------------------------------------------
    addCheck(check, live) {
      const list = this.$(check.status === "pass" ? "passed-list" : "checks");
      const existing = this.root.querySelector(`.sub__check[data-check="${CSS.escape(check.id)}"]`);
      const where = check.rank != null && check.line != null
        ? fmt(this.t.where_rank_line, { rank: check.rank, line: check.line })
        : check.rank != null ? fmt(this.t.where_rank, { rank: check.rank })
          : check.line != null ? fmt(this.t.where_line, { line: check.line }) : "";
      let whereNode = null;
      if (where && check.line != null) {
        const link = el("button", { type: "button", className: "link-button sub__line", "data-line": check.line, title: this.t.go_to_line, text: where });
        link.addEventListener("click", () => this.goToLine(Number(check.line)));
        whereNode = el("span", { className: "sub__where" }, " (", link, ")");
      } else if (where) {
        whereNode = el("span", { className: "sub__where", text: " (" + where + ")" });
      }
      const item = el(
        "li",
        { className: `sub__check sub__check--${check.status}`, "data-check": check.id, "data-status": check.status },
        el("span", { className: "sub__badge", text: this.t[check.status] || check.status }),
        el("strong", { className: "sub__check-title", text: check.title || check.id }),
        whereNode,
        check.message ? el("p", { className: "sub__message" }, withCode(check.message)) : null,
        check.hint && check.status === "fail"
          ? el("p", { className: "sub__hint" }, el("strong", { text: this.t.hint + " " }), withCode(check.hint))
          : null,
      );
      if (existing) existing.remove();
      const order = { fail: 0, skip: 1, pass: 2 };
      const after = [...list.children].find((node) => (order[node.dataset.status] ?? 3) > (order[check.status] ?? 3));
      list.insertBefore(item, after || null);
      const passed = this.$("passed-list").children.length;
      this.$("passed").hidden = passed === 0;
      this.$("passed-count").textContent = fmt(this.t.passed_count, { n: passed });
      if (live) this.$("results").hidden = false;
    }

    showResult(status, result, focus) {
      this.setRunning(false);
      this.stopTimer();
      this.status("");
      if (!result) return;
      const outcome = result.status;
      this.$("results").hidden = false;
      const summary = this.$("summary");
      summary.className = `sub__summary sub__summary--${outcome}`;
      summary.replaceChildren(
        el("strong", { text: this.t["outcome_" + outcome] || outcome }),
        " ",
        result.summary || "",
      );
      if (outcome === "error" && result.error) summary.append(el("span", { className: "sub__detail", text: " " + result.error }));
      this.$("checks").replaceChildren();
      this.$("passed-list").replaceChildren();
      for (const check of result.checks || []) this.addCheck(check, false);
      this.$("next").hidden = outcome !== "pass";
      // Panes filled live are kept; without them (a reload), show the deciding run's output.
      const streamed = this.panes.size > 0;
      const size = result.launch && result.launch.world_size;
      for (const rank of result.ranks || []) {
        const pre = streamed ? this.lastPane(rank.rank, size) : this.pane(rank.rank, size);
        if (!pre) continue;
        if (!streamed) pre.textContent = rank.output || this.t.no_output;
        if (rank.truncated) pre.append(el("em", { text: "\n" + this.t.truncated }));
        // Only for a rank that ended in failure: a crash a restart recovered from is history.
        this.showErrorEnd(pre, rank.exit_code ? rank.stack : null, rank.output);
      }
      this.showSampler(result.artifacts && result.artifacts.sampler);
      showTimeline(this.$("timeline"), result.timeline);
      this.showStacks(result.ranks || []);
      // The verdict, not the middle of the check list: scrolled into view, focused, announced.
      if (focus) {
        summary.focus({ preventScroll: true });
        summary.scrollIntoView({ block: "start", behavior: "auto" });
      }
      // The coach panel (coach.js) offers "Why did this fail?" on the failed checks.
      this.root.dispatchEvent(new CustomEvent("rdv:result", {
        bubbles: true,
        detail: { exercise: this.exercise, submissionId: this.submissionId, status: outcome },
      }));
    }

    // A rank that died of a Python error: the traceback's end (the learner's last line and the
    // error) first in its pane, above output that often ends in torch's C++ frames.
    showErrorEnd(pre, stack, output) {
      const section = pre.parentElement;
      section.querySelectorAll(".sub__error-end").forEach((node) => node.remove());
      const end = pythonErrorEnd(stack) || fatalErrorEnd(stack, output);
      if (!end) return;
      section.insertBefore(
        el("div", { className: "sub__error-end" },
          el("p", { className: "sub__error-end-title", text: this.t.error_end }),
          el("pre", { className: "sub__log", tabindex: "0", text: end })),
        pre,
      );
    }

    showStacks(ranks) {
      const box = this.$("stacks");
      box.querySelectorAll("details").forEach((node) => node.remove());
      const stuck = ranks.filter((rank) => rank.stack);
      box.hidden = stuck.length === 0;
      for (const rank of stuck) {
        box.append(el("details", { open: true },
          el("summary", { text: fmt(this.t.stack_of, { n: rank.rank }) }),
          el("pre", { className: "sub__log", tabindex: "0", text: rank.stack })));
      }
    }

    showSampler(sampler) {
      const box = this.$("sampler");
      const holder = this.$("sampler-picture");
      holder.replaceChildren();
      if (!sampler || !sampler.epochs || sampler.epochs.length === 0) {
        box.hidden = true;
        return;
      }
      box.hidden = false;
      holder.append(samplerPicture(sampler, this.t));
    }
  }

  // The result's timeline (static/js/timeline.js), loaded with its styles only when a result
  // that has one arrives; hidden otherwise.
  function showTimeline(box, timeline) {
    if (!box) return;
    if (!timeline || !timeline.launches || !timeline.launches.length) {
      box.hidden = true;
      return;
    }
    if (window.RdvTimeline) {
      window.RdvTimeline.show(box, timeline);
      return;
    }
    box.rdvTimeline = timeline; // the latest result's, drawn once the script is there
    if (!timelineLoading) {
      if (box.dataset.style) document.head.append(el("link", { rel: "stylesheet", href: box.dataset.style }));
      timelineLoading = new Promise((resolve) => {
        const script = el("script", { src: box.dataset.script });
        script.addEventListener("load", resolve);
        document.head.append(script);
      });
    }
    timelineLoading.then(() => window.RdvTimeline && window.RdvTimeline.show(box, box.rdvTimeline));
  }
  let timelineLoading = null;

  // The end of a Python traceback: the learner's last line that ran (the last frame in main.py,
  // else the last frame) and the error, without the C++ frames torch appends to its errors
  // ("Exception raised from ...", "frame #3: ...") or the ^^^ markers. Nothing for a stack that
  // is no traceback (a hang's stack dump is shown apart).
  function pythonErrorEnd(stack) {
    if (!stack || !/Traceback \(most recent call last\)/.test(stack)) return "";
    const lines = String(stack).split("\n");
    const start = lines.map((line) => /^Traceback \(most recent call last\)/.test(line)).lastIndexOf(true);
    const tail = lines.slice(start);
    const noise = (line) => !line.trim() || /^\s*frame #\d+:/.test(line) || /^Exception raised from /.test(line) || /^\s*[\^~]+\s*$/.test(line);
    const frames = [];
    tail.forEach((line, index) => { if (/^\s*File "/.test(line)) frames.push(index); });
    if (!frames.length) return "";
    const learner = frames.filter((index) => /^\s*File "(\/work\/)?main\.py"/.test(tail[index]));
    const shown = learner.length ? learner[learner.length - 1] : frames[frames.length - 1];
    const kept = [tail[shown].trim()];
    if (tail[shown + 1] && /^\s{4,}\S/.test(tail[shown + 1]) && !noise(tail[shown + 1])) kept.push("  " + tail[shown + 1].trim());
    let index = frames[frames.length - 1] + 1;
    while (index < tail.length && /^\s{4,}/.test(tail[index])) index += 1; // the last frame's code
    const error = tail.slice(index).filter((line) => !noise(line));
    return kept.concat(error.slice(0, 4)).join("\n");
  }

  // A rank that died in C++ (gloo's abort, a segfault): no Python traceback, but its stack dump
  // says "Fatal Python error" and its output the C++ error (terminate called ... what(): ...).
  // The learner's innermost line, the fatal error and the C++ reason.
  function fatalErrorEnd(stack, output) {
    const fatal = /^Fatal Python error: .*$/m.exec(stack || "");
    if (!fatal) return "";
    const kept = [];
    const frame = String(stack).split("\n").find((line) => /^\s*File "main\.py"/.test(line));
    if (frame) kept.push(frame.trim());
    kept.push(fatal[0].trim());
    const reasons = String(output || "").split("\n")
      .filter((line) => /terminate called|what\(\):/.test(line)).map((line) => line.trim());
    return kept.concat(reasons.slice(-2)).join("\n");
  }

  // An SVG grid: one row per epoch, one column per dataset index, coloured by the rank that
  // trained on it (dark: two or more ranks; light grey: nobody). Text rows say the same.
  function samplerPicture(sampler, t) {
    const epochs = sampler.epochs;
    let size = sampler.dataset_len || 0;
    const rankIds = new Set();
    for (const epoch of epochs) {
      for (const [rank, seen] of Object.entries(epoch.ranks || {})) {
        rankIds.add(Number(rank));
        for (const index of seen.indices || []) size = Math.max(size, index + 1);
      }
    }
    const ranks = [...rankIds].sort((a, b) => a - b);
    const cell = 4;
    const width = Math.max(1, size) * cell;
    // Rows tall enough to read on a phone, whatever the dataset size.
    const rowHeight = Math.max(cell * 4, Math.round(width / 14));
    const rowGap = Math.round(rowHeight / 5);
    const height = epochs.length * (rowHeight + rowGap);
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("class", "sub__sampler-svg");
    const title = document.createElementNS(SVG_NS, "title");
    title.textContent = t.sampler_title;
    svg.append(title);
    // Overlap: red and white stripes, so a run where every rank saw everything is not a black bar.
    const defs = document.createElementNS(SVG_NS, "defs");
    const pattern = document.createElementNS(SVG_NS, "pattern");
    pattern.setAttribute("id", "rdv-overlap");
    pattern.setAttribute("patternUnits", "userSpaceOnUse");
    pattern.setAttribute("width", String(cell * 2));
    pattern.setAttribute("height", String(cell * 2));
    pattern.setAttribute("patternTransform", "rotate(45)");
    // Paths, not rects: every rect of the picture is a run of dataset indices (data-owner).
    const back = document.createElementNS(SVG_NS, "path");
    back.setAttribute("d", `M0 0h${cell * 2}v${cell * 2}H0z`);
    back.setAttribute("fill", "#ffffff");
    const stripe = document.createElementNS(SVG_NS, "path");
    stripe.setAttribute("d", `M0 0h${cell}v${cell * 2}H0z`);
    stripe.setAttribute("fill", "#cf222e");
    pattern.append(back, stripe);
    defs.append(pattern);
    svg.append(defs);
    const rows = el("ul", { className: "sub__sampler-rows" });
    epochs.forEach((epoch, row) => {
      const owner = new Array(size).fill(-1);
      const counts = [];
      let overlap = 0;
      for (const [rank, seen] of Object.entries(epoch.ranks || {})) {
        const indices = seen.indices || [];
        counts.push(`${fmt(t.rank, { n: rank })}: ${seen.count ?? indices.length}`);
        for (const index of indices) {
          if (owner[index] === -1) owner[index] = Number(rank);
          else if (owner[index] !== Number(rank)) { if (owner[index] !== -2) overlap += 1; owner[index] = -2; }
        }
      }
      const y = row * (rowHeight + rowGap);
      const group = document.createElementNS(SVG_NS, "g");
      group.setAttribute("data-epoch", String(epoch.epoch ?? row));
      let start = 0;
      for (let index = 1; index <= size; index += 1) {
        if (index < size && owner[index] === owner[start]) continue;
        const rect = document.createElementNS(SVG_NS, "rect");
        rect.setAttribute("x", String(start * cell));
        rect.setAttribute("y", String(y));
        rect.setAttribute("width", String((index - start) * cell));
        rect.setAttribute("height", String(rowHeight));
        const who = owner[start];
        rect.setAttribute("fill", who === -2 ? OVERLAP_COLOUR : who === -1 ? UNSEEN_COLOUR : RANK_COLOURS[who % RANK_COLOURS.length]);
        rect.setAttribute("data-owner", who === -2 ? "overlap" : who === -1 ? "unseen" : String(who));
        group.append(rect);
        start = index;
      }
      svg.append(group);
      rows.append(el("li", { text: fmt(t.sampler_row, { epoch: epoch.epoch ?? row, counts: counts.join(", "), overlap }) }));
    });
    const legend = el("ul", { className: "sub__legend" });
    // Swatch colours come from classes in submissions.css (the same palette as RANK_COLOURS):
    // the site's CSP refuses inline style attributes.
    for (const rank of ranks) {
      legend.append(el("li", {}, el("span", { className: `sub__swatch sub__swatch--r${rank % RANK_COLOURS.length}` }), fmt(t.rank, { n: rank })));
    }
    legend.append(el("li", {}, el("span", { className: "sub__swatch sub__swatch--overlap" }), t.overlap));
    legend.append(el("li", {}, el("span", { className: "sub__swatch sub__swatch--unseen" }), t.unseen));
    const figure = el("figure", { className: "sub__figure" });
    figure.append(svg, legend, rows);
    return figure;
  }

  function start() {
    document.querySelectorAll("section.sub[data-exercise]").forEach((root) => {
      const exercise = new Exercise(root);
      root.rdvExercise = exercise;
      exercise.init().catch((err) => console.error("exercise editor", err));
    });
  }

  window.RdvSubmit.samplerPicture = samplerPicture;
  window.RdvSubmit.pythonErrorEnd = pythonErrorEnd;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
