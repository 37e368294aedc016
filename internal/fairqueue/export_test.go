package fairqueue

// NewQueueOver is newQueueOver: the tests count what is pushed.
var NewQueueOver = newQueueOver
