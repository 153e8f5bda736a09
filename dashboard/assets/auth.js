// The dashboard's token (dashboard.Options.Token, serve -token-file): taken
// from the URL's fragment (#token=..., never sent to a server) or asked for
// once, kept in this tab's sessionStorage, and sent as a bearer token on
// every API call. Loaded before app.js.
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
  return {
    // headers returns the headers an API call carries.
    headers(extra) {
      const h = Object.assign({}, extra || {});
      const t = sessionStorage.getItem(storeKey);
      if (t) h["Authorization"] = "Bearer " + t;
      return h;
    },
    // ask shows the token form (after a 401); submitting it stores the
    // token and reloads the page.
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
    // unauthorized handles a 401: asks for the token, saying the stored
    // one was refused when there was one.
    unauthorized() { this.ask(!!sessionStorage.getItem(storeKey)); },
  };
})();
