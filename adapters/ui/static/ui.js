// The explorer's only script (no inline script anywhere: the page's Content-Security-Policy forbids it).
// Live parts: an element with data-live="URL" reloads its inner HTML from URL every data-every ms
// (default 2000), asking the server for the page's content block only (X-Fragment: 1). It stops when
// the fragment carries data-live-done. Forms with data-confirm ask first; inputs with data-autosubmit
// submit their form when changed (the "state as of" slider).
"use strict";

function reload(el) {
  const url = el.getAttribute("data-live");
  fetch(url, { headers: { "X-Fragment": "1" }, credentials: "same-origin" })
    .then((r) => {
      if (r.redirected || r.status === 401) { window.location.assign("/ui/login"); return null; }
      return r.text();
    })
    .then((html) => {
      if (html === null) return;
      const doc = new DOMParser().parseFromString(html, "text/html");
      const fresh = doc.querySelector("[data-live='" + url.replace(/'/g, "\\'") + "']") || doc.body;
      el.replaceChildren(...Array.from((fresh.matches && fresh.matches("[data-live]") ? fresh : fresh).childNodes));
      if (!el.querySelector("[data-live-done]")) schedule(el);
    })
    .catch(() => schedule(el));
}

function schedule(el) {
  const every = parseInt(el.getAttribute("data-every") || "2000", 10);
  window.setTimeout(() => reload(el), every);
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach((el) => {
    if (!el.querySelector("[data-live-done]")) schedule(el);
  });
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
    });
  });
  document.querySelectorAll("[data-autosubmit]").forEach((input) => {
    input.addEventListener("change", () => input.form && input.form.submit());
  });
});
