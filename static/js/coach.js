// The "Ask the coach" panel (templates/coach/_panel.html): POST /api/v1/coach with
// Accept: text/event-stream. While a model writes, its checked lines are shown as plain text;
// the final answer is the server's HTML (Markdown rendered with raw HTML escaped). Failed checks
// of a result (submit.js dispatches `rdv:result`) get a "Why did this fail?" button; it sends
// what it asks as `intent` with the check's id (the server never re-reads the button's text),
// and the answer offers "A hint" and "Still stuck" on the same check. The button's question is
// put in the field selected, so what the learner types replaces it rather than joining it.
(function () {
  "use strict";
  const panel = document.getElementById("coach");
  if (!panel) return;
  const $ = (role) => panel.querySelector(`[data-role="${role}"]`);
  const t = (key) => panel.getAttribute("data-t-" + key) || "";
  const form = $("coach-form");
  const context = { exercise: null, submissionId: null };
  // The last button's ask: sent again as it is while the field still holds its question.
  const asked = { checkId: null, intent: null, question: null };
  // The panel sits below the steps; asked about a result, it moves beside that result.
  const home = document.createComment("coach panel");
  panel.before(home);

  function fmt(template, values) {
    return String(template).replace(/\{(\w+)\}/g, (_, key) => (key in values ? values[key] : ""));
  }

  function currentStep() {
    const card = document.querySelector(".step-card:not([hidden])");
    return card ? card.dataset.stepId : null;
  }

  function setContext(exercise, submissionId) {
    context.exercise = exercise;
    context.submissionId = submissionId;
    const box = $("coach-context");
    if (!box) return;
    box.hidden = !submissionId;
    $("coach-context-text").textContent = submissionId ? fmt(t("about-run"), { exercise }) : "";
  }

  function showError(message) {
    const box = $("coach-error");
    box.textContent = message;
    box.hidden = !message;
  }

  function showSources(sources) {
    const nav = $("coach-sources");
    const list = nav.querySelector("ul");
    list.replaceChildren();
    for (const source of sources || []) {
      if (typeof source.url !== "string" || !source.url.startsWith("/")) continue;
      const link = document.createElement("a");
      link.href = source.url;
      link.textContent = source.title;
      const item = document.createElement("li");
      item.append(link);
      list.append(item);
    }
    nav.hidden = list.children.length === 0;
  }

  function startAnswer() {
    const box = $("coach-answer");
    const text = $("coach-text");
    text.replaceChildren();
    text.classList.add("coach__streaming");
    $("coach-provider").textContent = "";
    showSources([]);
    box.hidden = false;
    box.setAttribute("aria-busy", "true");
  }

  function finishAnswer(answer) {
    const box = $("coach-answer");
    const text = $("coach-text");
    text.classList.remove("coach__streaming");
    // answer_html comes from the server's Markdown renderer with HTML disabled (never raw
    // model output), the same renderer as the lesson texts.
    text.innerHTML = answer.answer_html;
    $("coach-provider").textContent = answer.provider === "llm" ? t("by-model") : t("by-builtin");
    showSources(answer.sources);
    box.setAttribute("aria-busy", "false");
    $("coach-status").textContent = t("done");
    // About an exercise's run: the way back to its editor, screens above on a phone.
    $("coach-back").hidden = !codeRoot;
    const followups = $("coach-followups");
    if (followups) followups.hidden = !(asked.checkId && context.submissionId);
    box.focus({ preventScroll: false });
  }

  // Server-Sent Events over a POST: the browser's EventSource only does GET.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let kind = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) kind = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        onEvent(kind, data ? JSON.parse(data) : {});
      }
    }
  }

  // checkId and intent: what a button asks about (why_failed, hint, still_stuck); null: typed.
  async function ask(question, checkId = null, intent = null) {
    const button = $("coach-ask");
    showError("");
    button.disabled = true;
    $("coach-status").textContent = t("thinking");
    const body = {
      question,
      lesson_id: panel.dataset.lessonId,
      step_id: context.submissionId ? null : currentStep(),
      exercise: context.exercise,
      submission_id: context.submissionId,
    };
    if (checkId && context.submissionId) body.check_id = checkId;
    if (intent && context.submissionId) body.intent = intent;
    try {
      const response = await fetch("/api/v1/coach?locale=" + encodeURIComponent(panel.dataset.locale), {
        method: "POST",
        credentials: "same-origin",
        headers: {
          Accept: "text/event-stream",
          "Content-Type": "application/json",
          "X-CSRF-Token": panel.dataset.csrf || "",
        },
        body: JSON.stringify(body),
      });
      if (!response.ok) {
        let message = t("network");
        try { message = (await response.json()).message || message; } catch (_) { /* keep */ }
        $("coach-status").textContent = "";
        showError(message);
        return;
      }
      startAnswer();
      await readEvents(response, (kind, data) => {
        if (kind === "delta") $("coach-text").append(document.createTextNode(data.text));
        else if (kind === "reset") $("coach-text").replaceChildren();
        else if (kind === "done") finishAnswer(data);
      });
    } catch (_) {
      $("coach-status").textContent = "";
      showError(t("network"));
    } finally {
      button.disabled = false;
    }
  }

  if (form) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const field = form.elements.namedItem("question");
      const question = field.value.trim();
      if (!question) { field.focus(); return; }
      // The button's own question, untouched: ask the button's intent again, not its text.
      if (asked.intent && question === asked.question) {
        ask(question, asked.checkId, asked.intent);
        return;
      }
      // Typed: classified by the server, still about the check the learner was shown.
      asked.intent = asked.question = null;
      ask(question, asked.checkId);
    });
    // A pre-filled question is selected when the field is entered: typing replaces it.
    form.elements.namedItem("question").addEventListener("focus", (event) => {
      if (asked.question && event.target.value.trim() === asked.question) event.target.select();
    });
    const followups = $("coach-followups");
    if (followups) {
      for (const button of followups.querySelectorAll("button[data-intent]")) {
        button.addEventListener("click", () => {
          if (!asked.checkId) return;
          asked.intent = button.dataset.intent;
          asked.question = button.textContent.trim();
          form.elements.namedItem("question").value = asked.question;
          ask(asked.question, asked.checkId, asked.intent);
        });
      }
    }
    $("coach-forget").addEventListener("click", () => {
      setContext(null, null);
      asked.checkId = asked.intent = asked.question = null;
      home.after(panel);
      codeRoot = null;
      $("coach-back").hidden = true;
      form.elements.namedItem("question").focus();
    });
  }

  // The exercise whose results the panel sits beside (null: the lesson's own place).
  let codeRoot = null;

  function besideResults(root) {
    const results = root.querySelector('[data-role="results"]');
    if (results) results.after(panel);
    codeRoot = results ? root : null;
  }

  const back = $("coach-back");
  if (back) {
    back.querySelector("button").addEventListener("click", () => {
      const code = codeRoot && (codeRoot.querySelector(".cm-content") || codeRoot.querySelector("textarea"));
      if (!code) return;
      code.scrollIntoView({ block: "center" });
      code.focus({ preventScroll: true });
    });
  }

  function askAbout(root, exercise, submissionId, question, checkId, intent) {
    besideResults(root);
    setContext(exercise, submissionId);
    Object.assign(asked, { checkId, intent, question });
    const field = form.elements.namedItem("question");
    field.value = question;
    panel.scrollIntoView({ block: "start" });
    ask(question, checkId, intent);
  }

  // A graded result: offer the coach on it and on each failed check.
  document.addEventListener("rdv:result", (event) => {
    if (!form) return;
    const { exercise, submissionId, status } = event.detail || {};
    const root = event.target;
    if (!submissionId || !root || status === "error") return;
    const results = root.querySelector('[data-role="results"]');
    // A newer result replaces the button (it names the submission it asks about).
    if (results) results.querySelectorAll(".sub__ask").forEach((node) => node.remove());
    if (results) {
      const ask = document.createElement("button");
      ask.type = "button";
      ask.className = "button--secondary sub__ask";
      ask.textContent = t("ask-run");
      ask.addEventListener("click", () => {
        besideResults(root);
        setContext(exercise, submissionId);
        asked.checkId = asked.intent = asked.question = null;
        form.elements.namedItem("question").value = "";
        form.elements.namedItem("question").focus();
      });
      results.append(ask);
    }
    for (const item of root.querySelectorAll('[data-role="checks"] li[data-status="fail"]')) {
      if (item.querySelector(".sub__why")) continue;
      const title = item.querySelector(".sub__check-title");
      const why = document.createElement("button");
      why.type = "button";
      why.className = "button--secondary sub__why";
      why.textContent = t("why");
      why.setAttribute("aria-label", t("why") + " " + (title ? title.textContent : ""));
      why.addEventListener("click", () =>
        askAbout(root, exercise, submissionId, fmt(t("why-question"), { title: title ? title.textContent : item.dataset.check }), item.dataset.check, "why_failed"));
      item.append(why);
    }
  });
})();
