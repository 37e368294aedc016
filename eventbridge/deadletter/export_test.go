package deadletter

import "time"

// SetCountAgain has w count a namespace's letters from the stream again
// once its count is older than d (CountAgain otherwise).
func (w *Writer) SetCountAgain(d time.Duration) { w.countAgain.Store(int64(d)) }
