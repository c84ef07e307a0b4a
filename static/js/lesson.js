// Lesson page: one card at a time (buttons, links, arrow keys), in the lesson's own sequence:
// steps, quick-check questions (each answered in place) and exercises.
// Without JavaScript the same links and forms work as ordinary page loads.
(function () {
  "use strict";

  var steps = document.getElementById("steps");
  if (steps) setUpSteps(steps);
  document.querySelectorAll("form.quiz-question[data-api]").forEach(setUpQuestion);
  keyboardScrollers();

  // The lesson is one sequence of cards in the author's order: steps, questions (one per card)
  // and exercises. After the last card comes the next lesson.
  function setUpSteps(root) {
    var cards = Array.prototype.slice.call(root.querySelectorAll(".step-card"));
    var status = document.getElementById("step-status");
    var prev = root.querySelector('[data-step-nav="prev"]');
    var next = root.querySelector('[data-step-nav="next"]');
    var after = root.querySelector('[data-step-nav="after"]');
    var lessonId = (document.getElementById("lesson") || root).getAttribute("data-lesson-id");
    var current = parseInt(root.getAttribute("data-current"), 10) || 1;
    var total = cards.length;
    // The last step's place among all the cards (questions and exercises may follow it): reaching
    // it completes it, as progress.js reads `index === total`.
    var stepCards = root.querySelectorAll(".step-card[data-step-id]");
    var lastStepIndex = stepCards.length ? cards.indexOf(stepCards[stepCards.length - 1]) + 1 : 0;
    var meterBox = root.querySelector(".step-meter");
    var parts = parseInt(meterBox && meterBox.getAttribute("data-parts"), 10) || total;

    // Where the learner is in the whole sequence.
    function setPart(node) {
      var position = parseInt(node.getAttribute("data-step-index"), 10);
      if (meterBox && position) meterBox.value = Math.min(position, parts);
      if (status) status.textContent = node.getAttribute("data-progress-label");
    }

    // The card a link's #fragment points into (#quiz is the quick check's first question,
    // #exercises the first exercise).
    function cardOf(hash) {
      if (!hash || hash.length < 2) return 0;
      var target = hash === "#quiz" ? root.querySelector(".step-card--quiz")
        : hash === "#exercises" ? root.querySelector(".step-card--exercise")
        : document.getElementById(decodeURIComponent(hash.slice(1)));
      var card = target && target.closest && target.closest(".step-card");
      return card ? cards.indexOf(card) + 1 : 0;
    }
    function follow(hash, moveFocus) {
      var index = cardOf(hash);
      if (!index) return;
      show(index, moveFocus, true);
      var special = hash === "#quiz" || hash === "#exercises";
      var target = special ? null : document.getElementById(decodeURIComponent(hash.slice(1)));
      if (target && !moveFocus) target.scrollIntoView({ block: "start" });
    }
    window.addEventListener("hashchange", function () { follow(window.location.hash, true); });

    function stepUrl(index) {
      var url = new URL(window.location.href);
      url.searchParams.set("step", String(index));
      url.searchParams.delete("question");
      url.searchParams.delete("choice");
      url.hash = "steps";
      return url;
    }

    function setLink(link, index, disabled) {
      if (!link) return;
      link.setAttribute("href", stepUrl(index).pathname + stepUrl(index).search + "#steps");
      if (disabled) link.setAttribute("aria-disabled", "true");
      else link.removeAttribute("aria-disabled");
    }

    function show(index, moveFocus, keepHash) {
      if (index < 1 || index > total || index === current) return;
      current = index;
      cards.forEach(function (card, i) { card.hidden = i + 1 !== index; });
      var card = cards[index - 1];
      setPart(card);
      root.setAttribute("data-current", String(index));
      setLink(prev, Math.max(index - 1, 1), index <= 1);
      setLink(next, Math.min(index + 1, total), index >= total && !after);
      if (after) {
        next.hidden = index >= total;
        after.hidden = index < total;
      }
      root.querySelectorAll("[data-step-link]").forEach(function (link) {
        var first = parseInt(link.getAttribute("data-step-link"), 10);
        var last = parseInt(link.getAttribute("data-step-link-last"), 10) || first;
        if (index >= first && index <= last) link.setAttribute("aria-current", "step");
        else link.removeAttribute("aria-current");
      });
      var url = stepUrl(index);
      if (keepHash) url.hash = window.location.hash;
      history.replaceState({ step: index }, "", url.pathname + url.search + url.hash);
      if (moveFocus) {
        // Focus the new title without scrolling, then bring the card's top into view only when it
        // is above the screen: on a phone the buttons stay where the thumb is.
        // (An exercise's card has its own heading: it takes the focus the same way.)
        var title = card.querySelector(".step-card__title") || card.querySelector("h3");
        if (title && !title.hasAttribute("tabindex")) title.setAttribute("tabindex", "-1");
        if (title) title.focus({ preventScroll: true });
        var top = root.getBoundingClientRect().top;
        if (top < 0) window.scrollBy({ top: top - 8, behavior: "auto" });
      }
      announce(card);
    }

    // Progress sync hears about every card shown: a step's card is a position, and moving on
    // from a step completes it, also when a question or an exercise comes next (`stepId` null).
    function announce(card) {
      if (!card) return;
      var stepId = card.getAttribute("data-step-id");
      document.dispatchEvent(new CustomEvent("rdv:step", {
        detail: { lessonId: lessonId, stepId: stepId, index: cards.indexOf(card) + 1, total: lastStepIndex }
      }));
    }

    function onNav(event, delta) {
      event.preventDefault();
      show(current + delta, true);
    }
    if (prev) prev.addEventListener("click", function (event) { onNav(event, -1); });
    if (next) next.addEventListener("click", function (event) { onNav(event, 1); });
    root.querySelectorAll("[data-step-link]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        show(parseInt(link.getAttribute("data-step-link"), 10), true);
      });
    });

    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
      if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
      if (isTyping(event.target)) return;
      event.preventDefault();
      show(current + (event.key === "ArrowRight" ? 1 : -1), true);
    });

    // Tell listeners (progress sync) which step is shown at load; a link into a card shows it.
    // A copy saved on this device (read offline) was rendered at another card: ?step= wins.
    // A link into another card (an exercise's) reaches that card only, not the step before it.
    var asked = parseInt(new URLSearchParams(window.location.search).get("step"), 10);
    var linked = cardOf(window.location.hash);
    if (asked >= 1 && asked <= total && asked !== current) show(asked, false, true);
    else if (!linked || linked === current) announce(cards[current - 1]);
    if (window.location.hash) follow(window.location.hash, false);
  }

  function isTyping(target) {
    if (!target || !target.closest) return false;
    if (target.isContentEditable) return true;
    return Boolean(target.closest("input, textarea, select, [contenteditable], .cm-editor, [role=textbox], [role=radiogroup]"))
      || (target.type === "radio");
  }

  function setUpQuestion(form) {
    var feedback = form.querySelector(".quiz-feedback");
    var button = form.querySelector('button[type="submit"]');
    var fallback = false;
    form.addEventListener("submit", function (event) {
      if (fallback) return; // the API did not answer: let the form post to the page
      var checked = form.querySelector('input[name="choice"]:checked');
      if (!checked) return;
      event.preventDefault();
      button.disabled = true;
      var headers = { "Content-Type": "application/json", "Accept": "application/json" };
      var token = document.querySelector('meta[name="csrf-token"]');
      if (token) headers["X-CSRF-Token"] = token.getAttribute("content");
      fetch(form.getAttribute("data-api"), {
        method: "POST", credentials: "same-origin", headers: headers,
        body: JSON.stringify({ choice: checked.value })
      }).then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      }).then(function (data) {
        showVerdict(feedback, Boolean(data.correct), data.explanation_html || "");
        markAnswer(form, checked, feedback.getAttribute("data-your-answer-label"));
        button.disabled = false;
        answered(form, checked.value, Boolean(data.recorded), false);
      }).catch(function (error) {
        if (error instanceof TypeError) { // no connection: kept on the device, checked later
          markAnswer(form, checked, feedback.getAttribute("data-your-answer-label"));
          feedback.textContent = feedback.getAttribute("data-offline-label");
          button.disabled = false;
          answered(form, checked.value, false, true);
          return;
        }
        fallback = true;
        button.disabled = false;
        form.submit();
      });
    });
  }

  // Progress (progress.js) keeps answers no account has yet: a visitor's, or one made offline.
  function answered(form, choice, recorded, queued) {
    var card = form.closest(".step-card");
    var lesson = document.getElementById("lesson");
    document.dispatchEvent(new CustomEvent("rdv:answer", { detail: {
      lessonId: lesson && lesson.getAttribute("data-lesson-id"),
      questionId: card && card.getAttribute("data-question-id"),
      choice: choice, recorded: recorded, queued: queued, form: form
    } }));
  }

  // A code block that scrolls sideways (long lines on a phone) is a keyboard stop, so the
  // keyboard can scroll it too; one that fits stays out of the tab order. Watched by size: a
  // card shown later, a turned phone.
  function keyboardScrollers() {
    if (!window.ResizeObserver) return;
    var mark = function (pre) {
      var scrolls = pre.scrollWidth > pre.clientWidth + 1;
      var ours = pre.hasAttribute("data-scroll-stop");
      if (scrolls && !pre.hasAttribute("tabindex")) {
        pre.setAttribute("tabindex", "0");
        pre.setAttribute("data-scroll-stop", "");
      } else if (!scrolls && ours) {
        pre.removeAttribute("tabindex");
        pre.removeAttribute("data-scroll-stop");
      }
    };
    var observer = new ResizeObserver(function (entries) {
      entries.forEach(function (entry) { mark(entry.target); });
    });
    document.querySelectorAll("main pre").forEach(function (pre) { observer.observe(pre); });
  }

  // The page marks the saved answer (server-rendered); a new answer moves the mark.
  function markAnswer(form, checked, label) {
    form.querySelectorAll("[data-your-answer]").forEach(function (mark) { mark.remove(); });
    var choice = checked.closest("label");
    if (!choice || !label) return;
    var mark = document.createElement("span");
    mark.className = "badge choice__mine";
    mark.setAttribute("data-your-answer", "");
    mark.textContent = label;
    choice.appendChild(mark);
  }

  // The explanation comes as HTML rendered by the server from the lesson's Markdown (raw HTML
  // in a lesson is escaped there), like the step bodies.
  function showVerdict(feedback, correct, explanationHtml) {
    feedback.textContent = "";
    var box = document.createElement("div");
    box.className = "verdict " + (correct ? "verdict--correct" : "verdict--wrong");
    var p = document.createElement("p");
    var strong = document.createElement("strong");
    strong.textContent = feedback.getAttribute(correct ? "data-correct-label" : "data-wrong-label");
    p.appendChild(strong);
    box.appendChild(p);
    var prose = document.createElement("div");
    prose.className = "prose";
    prose.innerHTML = explanationHtml;
    box.appendChild(prose);
    feedback.appendChild(box);
  }
})();
