package endpoints

// ClaimBackoffs is how many Services w keeps a claim's backoff for.
func (w *Watcher) ClaimBackoffs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.claimAfter)
}
