// Live refresh: a page whose <main> has data-live re-fetches its live
// part (?fragment=1) every data-live milliseconds while it is visible, and
// swaps it in place. Everything else renders on the server.
(function () {
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  if (!main || !live || !main.dataset.live) return;
  var every = parseInt(main.dataset.live, 10) || 5000;
  var last = null; // the last fragment swapped in: an unchanged one is left alone
  function refresh() {
    if (document.hidden) return;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    fetch(url.toString(), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null && html !== last) {
          last = html;
          live.innerHTML = html;
          live.dataset.refreshed = String((parseInt(live.dataset.refreshed || "0", 10)) + 1);
        }
      })
      .catch(function () {});
  }
  setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();

// A button disabled until a time the server knows (Mark failed, before
// the in-flight bound) enables itself then: data-enable-in is how many
// milliseconds after the page was rendered. The server still decides.
(function () {
  var buttons = document.querySelectorAll("button[data-enable-in]");
  buttons.forEach(function (b) {
    var wait = parseInt(b.dataset.enableIn, 10) || 0;
    setTimeout(function () {
      b.disabled = false;
      b.removeAttribute("data-enable-in");
      var hint = document.getElementById("failable");
      if (hint) hint.textContent = "mark failed is allowed now: no request of its attempt can still commit";
    }, wait + 250);
  });
})();
