// The dashboard's token (dashboard.Options.Token, serve -token-file): taken
// from the URL's fragment (#token=..., never sent to a server) or asked for
// once, kept in this tab's sessionStorage, and sent as a bearer token on
// every call to the dashboard: this file wraps fetch, so app.js and
// history.js call it as if there were no token. A 401 shows the form.
// Loaded before the other scripts.
"use strict";

const auth = (() => {
  const storeKey = "lockgen-token";
  // The fragment's parts, "&"-separated: "token=..." (percent-decoded,
  // a "+" kept as such) and the rest, kept for app.js (the object shown).
  const parts = location.hash.slice(1).split("&");
  const tok = parts.find((p) => p.startsWith("token="));
  if (tok !== undefined) {
    sessionStorage.setItem(storeKey, decodeURIComponent(tok.slice("token=".length)));
    const rest = parts.filter((p) => p !== tok && p !== "").join("&");
    // Drop the token from the address bar and the history.
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }

  const self = {
    // ask shows the token form; submitting it stores the token and
    // reloads the page.
    ask(wrong) {
      const form = document.querySelector("#login");
      if (!form.hidden) return;
      document.querySelector("#login-wrong").hidden = !wrong;
      form.hidden = false;
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        sessionStorage.setItem(storeKey, document.querySelector("#login-token").value.trim());
        location.reload();
      }, { once: true });
      document.querySelector("#login-token").focus();
    },
  };

  // Every fetch of this origin carries the token, and a 401 asks for it
  // (saying the stored one was refused when there was one).
  const plainFetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input), location.href);
    const token = sessionStorage.getItem(storeKey);
    if (url.origin !== location.origin) return plainFetch(input, init);
    if (token) {
      init = Object.assign({}, init);
      const headers = new Headers(init.headers || (input instanceof Request ? input.headers : undefined));
      if (!headers.has("Authorization")) headers.set("Authorization", "Bearer " + token);
      init.headers = headers;
    }
    const r = await plainFetch(input, init);
    if (r.status === 401) self.ask(!!token);
    return r;
  };
  return self;
})();
