// The login page (login.html, served at /login): posts the token to /api/v1/login, which sets
// the dashboard's cookie and answers where to go next (the server checks `next`: only this
// server's own pages). A refused token is said in words under the field.
import './style.css';

const form = document.getElementById('login');
const token = document.getElementById('token');
const error = document.getElementById('error');
const button = document.getElementById('login-button');

// The words for a refused login: the server's detail, said for a person.
function loginError(status, detail) {
  if (status === 401) return 'That token is not valid: check that you pasted all of it, or ask for a new one.';
  if (status === 429) return `Too many attempts. ${detail || 'Try again in a minute.'}`;
  return detail || `The server answered HTTP ${status}.`;
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  error.textContent = '';
  button.disabled = true;
  try {
    const next = new URLSearchParams(location.search).get('next') || '/';
    const answer = await fetch('/api/v1/login', {
      method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: token.value.trim(), next }),
    });
    const body = await answer.json().catch(() => ({}));
    if (answer.ok) {
      location.assign(body.next || '/');
      return;
    }
    error.textContent = loginError(answer.status, body.detail);
    token.select();
  } catch (e) {
    error.textContent = `Could not reach the server: ${e.message}`;
  } finally {
    button.disabled = false;
  }
});
