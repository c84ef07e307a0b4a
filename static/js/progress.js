// Progress sync for a signed-in learner (learning domain). Listens to the lesson page's
// `rdv:step` events and records `position` and `step_completed` through the progress API, with
// the session cookie and the CSRF token. Offline-first: events wait in localStorage with their
// own ids and are sent again until the server has them (a resent event changes nothing).
(function () {
  "use strict";

  var KEY = "rdv:progress:pending";
  var ENDPOINT = "/api/v1/progress/events";
  var lastIndex = null;
  var sending = false;

  function newId() {
    if (window.crypto && crypto.randomUUID) return "web-" + crypto.randomUUID();
    return "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 12);
  }

  function load() {
    try { return JSON.parse(localStorage.getItem(KEY) || "[]"); } catch (e) { return []; }
  }

  function save(events) {
    try { localStorage.setItem(KEY, JSON.stringify(events.slice(-400))); } catch (e) { /* full */ }
  }

  function record(event) {
    var pending = load();
    if (event.type === "position") {
      // Only the latest position matters: drop older unsent ones for this lesson.
      pending = pending.filter(function (e) {
        return !(e.type === "position" && e.lesson_id === event.lesson_id);
      });
    }
    pending.push(event);
    save(pending);
  }

  function markCompleted(stepId) {
    var card = document.getElementById("step-" + stepId);
    if (card) card.classList.add("step-card--completed");
    var index = card && card.getAttribute("data-step-index");
    var link = index && document.querySelector('[data-step-link="' + index + '"]');
    if (link) link.classList.add("is-completed");
  }

  function flush(keepalive) {
    var batch = load().slice(0, 200);
    if (sending || !batch.length) return;
    var token = document.querySelector('meta[name="csrf-token"]');
    var headers = { "Content-Type": "application/json", "Accept": "application/json" };
    if (token) headers["X-CSRF-Token"] = token.getAttribute("content");
    sending = true;
    fetch(ENDPOINT, {
      method: "POST", credentials: "same-origin", headers: headers, keepalive: Boolean(keepalive),
      body: JSON.stringify({ events: batch })
    }).then(function (response) {
      // Stored (200) or refused for good (4xx other than 401/429): either way not worth resending.
      if (response.ok || (response.status >= 400 && response.status < 500 &&
                          response.status !== 401 && response.status !== 429)) {
        var sent = {};
        batch.forEach(function (e) { sent[e.id] = true; });
        save(load().filter(function (e) { return !sent[e.id]; }));
        return true;
      }
      return false;
    }).catch(function () { return false; /* offline: try again later */ }).then(function (ok) {
      sending = false;
      if (ok && load().length) flush(false); // events recorded while this batch was in flight
    });
  }

  document.addEventListener("rdv:step", function (event) {
    var d = event.detail || {};
    if (!d.lessonId || !d.stepId) return;
    var at = new Date().toISOString();
    if (lastIndex !== null && d.index > lastIndex) {
      var previous = document.querySelector('.step-card[data-step-index="' + lastIndex + '"]');
      var previousId = previous && previous.getAttribute("data-step-id");
      if (previousId) {
        record({ id: newId(), type: "step_completed", lesson_id: d.lessonId, step_id: previousId, at: at });
        markCompleted(previousId);
      }
    }
    if (d.index === d.total && lastIndex !== null) {
      record({ id: newId(), type: "step_completed", lesson_id: d.lessonId, step_id: d.stepId, at: at });
      markCompleted(d.stepId);
    }
    record({ id: newId(), type: "position", lesson_id: d.lessonId, step_id: d.stepId, at: at });
    lastIndex = d.index;
    flush(false);
  });

  window.addEventListener("online", function () { flush(false); });
  window.addEventListener("pagehide", function () { flush(true); });
  flush(false);
})();
