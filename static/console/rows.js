// Lists of rows in id order, each id once, in a scrolled log that follows the newest row
// while the reader is at the bottom.

const NEAR_BOTTOM_PX = 48;

export function rowList(list, scroller, render) {
  const shown = new Map();
  const follow = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < NEAR_BOTTOM_PX;
  return {
    get size() { return shown.size; },
    get oldest() { return shown.size ? Math.min(...shown.keys()) : null; },
    get newest() { return shown.size ? Math.max(...shown.keys()) : 0; },
    item(id) { return shown.get(id) ?? null; },
    clear() { shown.clear(); list.replaceChildren(); },
    // Adds a row unless its id is already shown; rows arrive mostly in order, so the
    // place is found walking back from the end.
    add(row) {
      if (shown.has(row.id)) return false;
      const atBottom = follow();
      const item = render(row);
      item.dataset.id = row.id;
      let next = null;
      for (let node = list.lastElementChild; node && (!node.dataset.id || Number(node.dataset.id) > row.id); node = node.previousElementSibling) {
        next = node;
      }
      list.insertBefore(item, next);
      shown.set(row.id, item);
      if (atBottom && !next) scroller.scrollTop = scroller.scrollHeight;
      return true;
    },
    // Older rows go on top; the reader's place stays where it was.
    addOlder(rows) {
      const before = scroller.scrollHeight;
      rows.forEach((row) => this.add(row));
      scroller.scrollTop += scroller.scrollHeight - before;
    },
    // Keeps the newest row in view when the reader was there (a draft grew).
    followIfNear(wasNear) {
      if (wasNear) scroller.scrollTop = scroller.scrollHeight;
    },
    near: follow,
  };
}
