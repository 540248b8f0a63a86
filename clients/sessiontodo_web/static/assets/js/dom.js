// Elements built from data without ever parsing markup: every string becomes a text node or an
// attribute value, so a todo reading `<img src=x onerror=…>` shows exactly that text. (The page's
// Content-Security-Policy requires Trusted Types and allows none: writing an HTML string would throw.)

const NEVER_FROM_DATA = /^(on|href$|src$|style$|action$|formaction$)/i;

/** An element with attributes (`class`, `dataset`, plain ones) and children (nodes or text). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (NEVER_FROM_DATA.test(name)) throw new Error(`attribute ${name} is not set by el()`);
    if (name === 'class') node.className = value;
    else if (name === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  node.append(...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false));
  return node;
}

/** Replace a node's children with `children` (nodes or text). */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false));
  return node;
}

/** Highlight a node for a moment (a live change), starting again if it is still highlighted. */
export function flash(node) {
  node.classList.remove('flash');
  void node.offsetWidth; // a reflow between the two restarts the animation
  node.classList.add('flash');
  node.addEventListener('animationend', () => node.classList.remove('flash'), { once: true });
}

/** Show or hide a node. */
export function show(node, visible) {
  node.hidden = !visible;
}
