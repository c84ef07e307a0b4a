// Progress on the lesson page (learning domain), for visitors and signed-in learners alike:
// the steps shown (`rdv:step` from lesson.js) become `position` and `step_completed` events, and
// quiz answers that did not reach an account (a visitor's, or any made offline: `rdv:answer`)
// become `quiz_answered` events, all kept in the outbox of the reference client (rdv-client.js)
// with their own ids. pwa.js sends the outbox when someone is signed in and online; an answer
// sent late is checked by the server then, and its verdict shown here (`rdv:synced`).
(function () {
  "use strict";

  var client = window.RdvClient;
  if (!client) return;
  var lastIndex = null;
  var queuedAnswers = {}; // question id -> the form whose verdict waits for the server

  function recorded() { document.dispatchEvent(new CustomEvent("rdv:recorded")); }

  var account = document.querySelector('meta[name="rdv-account"]');
  var visitor = !account || account.content !== "learner";

  function record(event) {
    event.id = client.newEventId();
    event.at = new Date().toISOString();
    if (visitor) event._visitor = true; // kept for whoever signs up or in on this device
    return client.record(event).then(recorded, function () { /* no IndexedDB: not kept */ });
  }

  // A legacy outbox (localStorage, before the IndexedDB one) is moved over once.
  try {
    var legacy = JSON.parse(localStorage.getItem("rdv:progress:pending") || "[]");
    localStorage.removeItem("rdv:progress:pending");
    legacy.forEach(function (event) { client.record(event); });
  } catch (e) { /* nothing to move */ }

  function markCompleted(stepId) {
    var card = document.getElementById("step-" + stepId);
    if (card) card.classList.add("step-card--completed");
    var index = card && card.getAttribute("data-step-index");
    var link = index && document.querySelector('[data-step-link="' + index + '"]');
    if (link) link.classList.add("is-completed");
  }

  document.addEventListener("rdv:step", function (event) {
    var d = event.detail || {};
    if (!d.lessonId) return;
    var events = [];
    if (lastIndex !== null && d.index > lastIndex) {
      var previous = document.querySelector('.step-card[data-step-index="' + lastIndex + '"]');
      var previousId = previous && previous.getAttribute("data-step-id");
      if (previousId) {
        events.push({ type: "step_completed", lesson_id: d.lessonId, step_id: previousId });
        markCompleted(previousId);
      }
    }
    if (d.stepId && d.index === d.total && lastIndex !== null) {
      events.push({ type: "step_completed", lesson_id: d.lessonId, step_id: d.stepId });
      markCompleted(d.stepId);
    }
    // A position names a step: a question's or an exercise's card keeps the last step's.
    if (d.stepId) events.push({ type: "position", lesson_id: d.lessonId, step_id: d.stepId });
    lastIndex = d.index;
    events.reduce(function (done, e) { return done.then(function () { return record(e); }); }, Promise.resolve());
  });

  document.addEventListener("rdv:answer", function (event) {
    var d = event.detail || {};
    if (d.recorded || !d.lessonId || !d.questionId || !d.choice) return;
    if (d.queued) queuedAnswers[d.questionId] = { form: d.form, lessonId: d.lessonId };
    record({ type: "quiz_answered", lesson_id: d.lessonId, question_id: d.questionId, choice: d.choice });
  });

  // Answers sent late: the server has checked them; show its verdict.
  document.addEventListener("rdv:synced", function (event) {
    var lessons = (event.detail && event.detail.state && event.detail.state.lessons) || {};
    Object.keys(queuedAnswers).forEach(function (questionId) {
      var waiting = queuedAnswers[questionId];
      var lesson = lessons[waiting.lessonId];
      var answer = lesson && lesson.quiz.answers[questionId];
      if (!answer) return;
      delete queuedAnswers[questionId];
      var feedback = waiting.form.querySelector(".quiz-feedback");
      feedback.textContent = "";
      var box = document.createElement("div");
      box.className = "verdict " + (answer.correct ? "verdict--correct" : "verdict--wrong");
      var line = document.createElement("p");
      var strong = document.createElement("strong");
      strong.textContent = feedback.getAttribute(answer.correct ? "data-correct-label" : "data-wrong-label");
      line.appendChild(strong);
      box.appendChild(line);
      feedback.appendChild(box);
    });
  });
})();
