package edge

import "context"

type requestKey struct{}

// withRequest stores the edge's request record in ctx, so that ReadBody and
// the handlers audit with the authenticated caller and the real start time.
func withRequest(ctx context.Context, q *request) context.Context {
	return context.WithValue(ctx, requestKey{}, q)
}

// requestFrom returns the request record stored by withRequest, or nil.
func requestFrom(ctx context.Context) *request {
	q, _ := ctx.Value(requestKey{}).(*request)
	return q
}
