// The Rendezvous reference client: offline-first progress and drafts, speaking only the
// documented REST API (README, "REST API for mobile developers"). It runs in pages and in the
// service worker (static/js/sw.js), and exposes `self.RdvClient`.
// - Progress: events (their own ids) wait in an outbox in IndexedDB until
//   POST /api/v1/progress/events has them; a resent event changes nothing on the server, which
//   merges them with every other device's and answers the merged state (and a cursor).
// - Drafts: PUT /api/v1/drafts/{exercise} with `base_updated_at`, the server version the code
//   was edited from; 409 `draft_conflict` means another device saved meanwhile.
// Credentials: the session cookie and the X-CSRF-Token of the last page seen (kept in IndexedDB
// for the worker). A visitor's events wait until someone signs in on this device.
(function (scope) {
  "use strict";

  var API = "/api/v1";
  var BATCH = 200; // the server takes up to 500 events per request
  var dbPromise = null;

  function openDb() {
    if (!dbPromise) {
      dbPromise = new Promise(function (resolve, reject) {
        var request = scope.indexedDB.open("rdv", 1);
        request.onupgradeneeded = function () {
          request.result.createObjectStore("outbox", { keyPath: "id" });
          request.result.createObjectStore("meta");
        };
        request.onsuccess = function () { resolve(request.result); };
        request.onerror = function () { reject(request.error); };
      });
    }
    return dbPromise;
  }

  // One transaction on `store`; `work(objectStore)` may return a request whose result we want.
  function inStore(store, mode, work) {
    return openDb().then(function (db) {
      return new Promise(function (resolve, reject) {
        var tx = db.transaction(store, mode);
        var request = work(tx.objectStore(store));
        tx.oncomplete = function () { resolve(request ? request.result : undefined); };
        tx.onerror = function () { reject(tx.error); };
        tx.onabort = function () { reject(tx.error); };
      });
    });
  }

  function getMeta(key) { return inStore("meta", "readonly", function (s) { return s.get(key); }); }
  function setMeta(key, value) {
    return inStore("meta", "readwrite", function (s) { s.put(value, key); });
  }

  function newEventId() {
    if (scope.crypto && scope.crypto.randomUUID) return "web-" + scope.crypto.randomUUID();
    return "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 12);
  }

  // Events waiting to be sent, oldest first.
  function pending() {
    return inStore("outbox", "readonly", function (s) { return s.getAll(); }).then(function (all) {
      return all.sort(function (a, b) { return a.at < b.at ? -1 : a.at > b.at ? 1 : 0; });
    });
  }

  // Keep an event until the server has it. Only the latest unsent position per lesson matters.
  function record(event) {
    return pending().then(function (events) {
      return inStore("outbox", "readwrite", function (s) {
        if (event.type === "position") {
          events.forEach(function (old) {
            if (old.type === "position" && old.lesson_id === event.lesson_id) s.delete(old.id);
          });
        }
        s.put(event);
      });
    });
  }

  function forget(ids) {
    return inStore("outbox", "readwrite", function (s) { ids.forEach(function (id) { s.delete(id); }); });
  }

  // What the page knows about who is signed in; the worker reads it back.
  function setSession(session) { return setMeta("session", session); }
  function session() { return getMeta("session").then(function (value) { return value || {}; }); }

  function call(method, path, body, csrf) {
    var headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
    return fetch(API + path, {
      method: method, headers: headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (response) {
      if (response.status === 204) return { ok: response.ok, status: response.status, data: null };
      return response.json().catch(function () { return null; }).then(function (data) {
        return { ok: response.ok, status: response.status, data: data };
      });
    });
  }

  // An event as the API takes it: fields starting with "_" are the device's own notes.
  function wire(event) {
    var sent = {};
    Object.keys(event).forEach(function (key) { if (key.charAt(0) !== "_") sent[key] = event[key]; });
    return sent;
  }

  // A refusal that sending again cannot change (not signed in, or too many requests, can).
  function refusedForGood(status) {
    return status >= 400 && status < 500 && status !== 401 && status !== 408 && status !== 429;
  }

  // Send the outbox in batches. Resolves {status: "synced", sent, state, rejected} (`state`: the
  // merged progress of the lessons the events touched), {status: "offline"} (nothing lost: the
  // events wait), {status: "signed-out"}, or {status: "idle"} when nothing was waiting.
  function syncProgress() {
    return session().then(function (who) {
      if (!who.signedIn) return { status: "signed-out" };
      var sent = 0;
      var state = { lessons: {} };
      var rejected = [];
      function next() {
        return pending().then(function (events) {
          var batch = events.slice(0, BATCH);
          if (!batch.length) return { status: sent ? "synced" : "idle", sent: sent, state: state, rejected: rejected };
          return call("POST", "/progress/events", { events: batch.map(wire) }, who.csrf).then(function (answer) {
            if (answer.status === 401) return { status: "signed-out" };
            if (!answer.ok && !refusedForGood(answer.status)) return { status: "offline", sent: sent };
            if (answer.ok) {
              Object.assign(state.lessons, answer.data.lessons);
              state.cursor = answer.data.cursor;
              rejected = rejected.concat(answer.data.rejected || []);
            }
            sent += batch.length;
            return forget(batch.map(function (e) { return e.id; })).then(next);
          });
        });
      }
      return next();
    }).catch(function () { return { status: "offline" }; });
  }

  // Drafts. Resolves {status: "saved", draft} | {status: "conflict", theirs} |
  // {status: "offline"} | {status: "refused", code, message}. `theirs`: the draft as the server
  // holds it now ({code, updated_at}, from the 409's `stored`), for the editor to offer.
  function saveDraft(exercise, code, baseUpdatedAt) {
    var body = { code: code };
    if (baseUpdatedAt) body.base_updated_at = baseUpdatedAt;
    return session().then(function (who) {
      return call("PUT", "/drafts/" + exercise, body, who.csrf);
    }).then(function (answer) {
      if (answer.ok) return { status: "saved", draft: answer.data };
      if (answer.status === 409) {
        return { status: "conflict", theirs: (answer.data && answer.data.stored) || null };
      }
      var data = answer.data || {};
      return { status: "refused", code: data.code, message: data.message };
    }, function () { return { status: "offline" }; });
  }

  // Resolves the server's draft, null when there is none, or {offline: true}.
  function loadDraft(exercise) {
    // ?missing=empty: no draft yet is a 204, not a 404 in the browser's console.
    return call("GET", "/drafts/" + exercise + "?missing=empty").then(function (answer) {
      return answer.ok ? answer.data : null;
    }, function () { return { offline: true }; });
  }

  scope.RdvClient = {
    newEventId: newEventId,
    record: record,
    pending: pending,
    syncProgress: syncProgress,
    setSession: setSession,
    session: session,
    saveDraft: saveDraft,
    loadDraft: loadDraft
  };
})(self);
