// The Rendezvous service worker (served at /sw.js by app/web/pwa.py, which puts
// `self.RDV = {version, shell, client}` on the line above this one).
// - The app shell (RDV.shell: the course page, the offline page, every page's CSS and scripts,
//   the icons) is cached when the worker installs.
// - Pages (the course and each lesson): network first; a good answer replaces the saved copy (an
//   edited lesson is replaced on the next online visit), so they are read offline in the language
//   they were last opened in. The next lesson is saved when the page asks ("cache-pages").
// - /static/ URLs with ?v=<content hash>: cache first (a new file has a new URL).
// - The API and anything else: the network only. Nothing but GET is ever touched.
// Caches are named by version; activating a new version copies the saved lessons afresh and drops
// every older cache. Background Sync ("rdv-outbox") sends the outbox with the reference client.
"use strict";

importScripts(self.RDV.client);

const VERSION = self.RDV.version;
const SHELL = "rdv-shell-" + VERSION;
const PAGES = "rdv-pages-" + VERSION;
const ASSETS = "rdv-assets-" + VERSION;
const OFFLINE_URL = "/offline";

function isSavedPage(url) {
  return url.pathname === "/" || /^\/lessons\/[^/]+$/.test(url.pathname);
}

function pageKey(url) {
  return url.origin + url.pathname; // ?step=, ?locale=: the same page, one copy
}

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(SHELL)
      .then((cache) => cache.addAll(self.RDV.shell))
      .then(() => self.skipWaiting()),
  );
});

// The lessons an older version saved, fetched again for this one; then the old caches go.
async function carryPagesOver() {
  const names = await caches.keys();
  const fresh = await caches.open(PAGES);
  for (const name of names) {
    if (!name.startsWith("rdv-pages-") || name === PAGES) continue;
    const old = await caches.open(name);
    for (const request of await old.keys()) {
      try {
        const response = await fetch(request.url, { credentials: "same-origin" });
        if (response.ok) await fresh.put(request.url, response);
      } catch (_) { /* offline now: the lesson is saved again on its next visit */ }
    }
  }
  await Promise.all(names
    .filter((name) => name.startsWith("rdv-") && ![SHELL, PAGES, ASSETS].includes(name))
    .map((name) => caches.delete(name)));
}

self.addEventListener("activate", (event) => {
  event.waitUntil(carryPagesOver().then(() => self.clients.claim()));
});

async function savePage(url, response) {
  const cache = await caches.open(PAGES);
  await cache.put(pageKey(url), response);
  // The offline page follows the learner's language.
  const shell = await caches.open(SHELL);
  const offline = await shell.match(OFFLINE_URL);
  const language = response.headers.get("Content-Language");
  if (language && offline && offline.headers.get("Content-Language") !== language) {
    const fresh = await fetch(OFFLINE_URL, { credentials: "same-origin" });
    if (fresh.ok) await shell.put(OFFLINE_URL, fresh);
  }
}

async function page(event, url) {
  try {
    const response = await fetch(event.request);
    const html = (response.headers.get("Content-Type") || "").startsWith("text/html");
    if (response.ok && html && !response.redirected && isSavedPage(url) &&
        !url.searchParams.has("welcome")) {
      event.waitUntil(savePage(url, response.clone()));
    }
    return response;
  } catch (error) {
    const saved = (await caches.match(pageKey(url), { cacheName: PAGES })) ||
      (await caches.match(pageKey(url), { cacheName: SHELL }));
    if (saved) return saved;
    const offline = await caches.match(OFFLINE_URL, { cacheName: SHELL });
    if (offline) return offline;
    throw error;
  }
}

async function asset(event, url) {
  const cached = await caches.match(event.request);
  if (cached) return cached;
  const response = await fetch(event.request);
  if (response.ok && url.searchParams.has("v")) {
    const copy = response.clone();
    event.waitUntil(caches.open(ASSETS).then((cache) => cache.put(event.request, copy)));
  }
  return response;
}

self.addEventListener("fetch", (event) => {
  if (event.request.method !== "GET") return;
  const url = new URL(event.request.url);
  if (url.origin !== self.location.origin) return;
  if (url.pathname.startsWith("/static/")) event.respondWith(asset(event, url));
  else if (event.request.mode === "navigate") event.respondWith(page(event, url));
});

// The page asks for pages to keep (the lesson after the one open).
self.addEventListener("message", (event) => {
  const data = event.data || {};
  if (data.type !== "cache-pages" || !Array.isArray(data.urls)) return;
  event.waitUntil(Promise.all(data.urls.map(async (href) => {
    const url = new URL(href, self.location.origin);
    if (url.origin !== self.location.origin || !isSavedPage(url)) return;
    try {
      const response = await fetch(url.href, { credentials: "same-origin" });
      if (response.ok) await (await caches.open(PAGES)).put(pageKey(url), response);
    } catch (_) { /* offline: the page asks again next time */ }
  })));
});

// Background Sync: the outbox is sent even when no page is open; the pages hear the result.
self.addEventListener("sync", (event) => {
  if (event.tag !== "rdv-outbox") return;
  event.waitUntil(self.RdvClient.syncProgress().then(async (outcome) => {
    if (outcome.status === "offline") throw new Error("offline: try again later");
    const pages = await self.clients.matchAll({ type: "window" });
    pages.forEach((client) => client.postMessage({ type: "progress-synced", outcome }));
  }));
});
