// A sign-in link (/login#token=…, printed by the board when it made its own token) fills the
// form and submits it. The token travels in the fragment, which browsers never send to a server
// nor put in a Referer; it is removed from the address bar before anything else happens.
const token = new URLSearchParams(location.hash.slice(1)).get('token');
if (token) {
  history.replaceState(null, '', location.pathname);
  document.getElementById('token').value = token;
  document.getElementById('token-form').requestSubmit();
}
