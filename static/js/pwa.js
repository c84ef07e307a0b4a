// Every page: the service worker (static/js/sw.js), the install button where the browser offers
// one, and the outbox sent through the reference client (rdv-client.js) on load, when the
// connection returns and after each recorded event (Background Sync where the browser has it).
// A visitor's events wait on the device; when they reach an account (sign-up or sign-in), the
// page is reloaded once to show the merged progress, with the welcome notice in view.
(function () {
  "use strict";

  var client = window.RdvClient;
  var account = document.querySelector('meta[name="rdv-account"]');
  var signedIn = Boolean(account && account.content === "learner");
  var csrf = document.querySelector('meta[name="csrf-token"]');
  // A page the worker answered from the device (offline: a saved lesson, or the offline page,
  // saved for whoever was there when it was kept) says nothing new about who is signed in: the
  // session stays as the last page loaded online left it, and so does the outbox's sending.
  var fromDevice = !navigator.onLine || Boolean(document.querySelector("[data-offline-page]"));
  var ready = !client ? Promise.resolve() : client.session().then(function (previous) {
    if (fromDevice) {
      signedIn = Boolean(previous.signedIn);
      return;
    }
    if (previous.signedIn && !signedIn) return forgetSavedPages();
    return client.setSession({ signedIn: signedIn, csrf: csrf ? csrf.content : "" });
  }).catch(function () {});

  // Signed out: the saved pages showed that learner's progress; the next person must not see it.
  function forgetSavedPages() {
    if (!window.caches) return Promise.resolve();
    return caches.keys().then(function (names) {
      return Promise.all(names.map(function (name) {
        if (name.indexOf("rdv-pages-") === 0) return caches.delete(name);
        if (name.indexOf("rdv-shell-") === 0) {
          return caches.open(name).then(function (cache) { return cache.delete("/"); });
        }
      }));
    });
  }

  // A visitor's events waiting at load: once merged into the account, reload to show them.
  var visitorEvents = !client ? Promise.resolve(0) : ready.then(client.pending).then(function (events) {
    return events.filter(function (event) { return event._visitor; }).length;
  }, function () { return 0; });
  var syncing = null;
  var again = false; // an event recorded while a sync was on its way: one more round after it

  function sync() {
    if (!client) return Promise.resolve({ status: "signed-out" });
    return ready.then(function () {
      return signedIn ? syncNow() : { status: "signed-out" };
    });
  }

  function syncNow() {
    if (syncing) {
      again = true;
      return syncing;
    }
    syncing = ready.then(client.syncProgress).then(function (outcome) {
      syncing = null;
      document.dispatchEvent(new CustomEvent("rdv:synced", { detail: outcome }));
      if (again && (outcome.status === "synced" || outcome.status === "idle")) {
        again = false;
        sync();
      }
      return outcome;
    });
    return syncing;
  }

  function backgroundSync() {
    if (!("serviceWorker" in navigator)) return;
    ready.then(function () {
      if (!signedIn) return null;
      return navigator.serviceWorker.ready;
    }).then(function (registration) {
      if (registration && registration.sync) return registration.sync.register("rdv-outbox");
    }).catch(function () { /* no Background Sync: the online event and the next load send it */ });
  }

  document.addEventListener("rdv:recorded", function () {
    if (navigator.onLine) sync();
    else backgroundSync();
  });
  window.addEventListener("online", function () { sync(); });

  // Keep this page and the next lesson for offline reading.
  function keepPages(registration) {
    var urls = [window.location.pathname];
    var lessons = Array.prototype.slice.call(document.querySelectorAll(".course-nav a"));
    var here = lessons.findIndex(function (link) { return link.getAttribute("aria-current") === "page"; });
    if (here >= 0 && lessons[here + 1]) urls.push(lessons[here + 1].getAttribute("href"));
    var worker = registration.active || registration.waiting || registration.installing;
    if (worker) worker.postMessage({ type: "cache-pages", urls: urls });
  }

  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/sw.js").then(function () {
      return navigator.serviceWorker.ready;
    }).then(keepPages).catch(function () { /* no worker: the site works online as before */ });
    navigator.serviceWorker.addEventListener("message", function (event) {
      if (event.data && event.data.type === "progress-synced") {
        document.dispatchEvent(new CustomEvent("rdv:synced", { detail: event.data.outcome }));
      }
    });
  }

  // The install affordance: shown only when the browser offers to install.
  var install = document.querySelector("[data-install]");
  var offer = null;
  window.addEventListener("beforeinstallprompt", function (event) {
    event.preventDefault();
    offer = event;
    if (install) install.hidden = false;
  });
  window.addEventListener("appinstalled", function () { if (install) install.hidden = true; });
  if (install) {
    install.addEventListener("click", function () {
      if (!offer) return;
      offer.prompt();
      offer.userChoice.then(function () { install.hidden = true; offer = null; });
    });
  }

  // A line at the top of the page while the connection is down: what is read here is the copy
  // saved on this device, and what is done here waits on it.
  function offlineIndicator() {
    var line = document.querySelector("[data-offline-indicator]");
    if (!line) return;
    var update = function () { line.hidden = navigator.onLine; };
    window.addEventListener("online", update);
    window.addEventListener("offline", update);
    update();
  }

  // The offline page lists the lessons this device keeps.
  function listSavedLessons(list) {
    if (!window.caches) return;
    caches.keys().then(function (names) {
      return Promise.all(names.filter(function (n) { return n.indexOf("rdv-pages-") === 0; }).map(function (name) {
        return caches.open(name).then(function (cache) { return cache.keys(); });
      }));
    }).then(function (groups) {
      var seen = {};
      [].concat.apply([], groups).forEach(function (request) {
        var url = new URL(request.url);
        if (url.pathname.indexOf("/lessons/") !== 0 || seen[url.pathname]) return;
        seen[url.pathname] = true;
        caches.match(request).then(function (response) { return response.text(); }).then(function (html) {
          var title = new DOMParser().parseFromString(html, "text/html").querySelector("#lesson-title");
          var item = document.createElement("li");
          var link = document.createElement("a");
          link.href = url.pathname;
          link.textContent = title ? title.textContent : url.pathname;
          item.appendChild(link);
          list.appendChild(item);
        });
      });
    }).catch(function () {});
  }

  document.addEventListener("DOMContentLoaded", function () {
    var saved = document.querySelector("[data-offline-lessons]");
    if (saved) listSavedLessons(saved);
    var welcome = document.querySelector(".notice--welcome");
    if (welcome) {
      var greet = function () {
        welcome.scrollIntoView({ block: "start" });
        welcome.focus({ preventScroll: true });
      };
      welcome.setAttribute("tabindex", "-1");
      greet();
      // The browser scrolls to the URL's #fragment (an exercise's card) after this: greet again
      // once the page has loaded, so the notice is what is on screen.
      if (document.readyState === "complete") requestAnimationFrame(greet);
      else window.addEventListener("load", function () { requestAnimationFrame(greet); });
    }
    offlineIndicator();
    Promise.all([visitorEvents, sync()]).then(function (results) {
      if (!fromDevice && results[0] > 0 && results[1].status === "synced") window.location.reload();
    });
  });
})();
