// A minimal page until the full web UI lands: it tells whether the API
// accepts this browser's token and how many sessions are stored.
(async () => {
  const status = document.getElementById("status");
  const res = await fetch("/api/sessions", { credentials: "same-origin" });
  if (res.status === 401) {
    status.textContent = "Not signed in: open the URL that dsh serve printed (it carries the token).";
    return;
  }
  const body = await res.json();
  status.textContent = `${body.sessions.length} stored session(s).`;
})().catch((e) => { document.getElementById("status").textContent = "Error: " + e; });
