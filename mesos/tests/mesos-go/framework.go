// A mesos-go framework run against `unisched serve --mesos-addr`.
//
// mesos-go (github.com/mesos/mesos-go, the Mesos project's Go bindings;
// Debian's golang-github-mesos-mesos-go-dev 0.0.6) has its own client of
// the v1 scheduler HTTP API: httpsched keeps the subscription and sends
// every later call with its Mesos-Stream-Id, and its controller runs the
// event loop. It speaks protobuf by default, the encoding none of the other
// framework libraries in these tests uses; `-codec json` picks JSON.
//
// Launches TASKS command tasks from the offers it gets (several per offer
// when they fit), declines what it does not use, acknowledges every update
// through the library's own rule, and exits 0 once every task reached
// TASK_FINISHED, printing a JSON summary last; non-zero with the reason
// otherwise. Used by mesos/tests/framework_libraries.rs.
//
// Usage: framework -codec protobuf|json MASTER TASKS
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	mesos "github.com/mesos/mesos-go/api/v1/lib"
	"github.com/mesos/mesos-go/api/v1/lib/encoding/codecs"
	"github.com/mesos/mesos-go/api/v1/lib/extras/scheduler/callrules"
	"github.com/mesos/mesos-go/api/v1/lib/extras/scheduler/controller"
	"github.com/mesos/mesos-go/api/v1/lib/extras/scheduler/eventrules"
	"github.com/mesos/mesos-go/api/v1/lib/extras/store"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler/calls"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler/events"
)

const (
	taskCPUs = 0.5
	taskMem  = 64.0
)

type summary struct {
	FrameworkID string   `json:"framework_id"`
	Codec       string   `json:"codec"`
	Launched    int      `json:"launched"`
	Finished    int      `json:"finished"`
	Failed      []string `json:"failed"`
	Offers      int      `json:"offers"`
	Acked       int      `json:"acknowledged"`
	AgentURLs   []string `json:"agent_urls"`
	TimedOut    bool     `json:"timed_out"`
}

type runner struct {
	mu       sync.Mutex
	tasks    int
	sum      summary
	urls     map[string]bool
	done     chan struct{}
	doneOnce sync.Once
}

func (r *runner) finish() { r.doneOnce.Do(func() { close(r.done) }) }

func scalar(resources []mesos.Resource, name string) float64 {
	total := 0.0
	for _, res := range resources {
		if res.GetName() == name && res.GetScalar() != nil {
			total += res.GetScalar().GetValue()
		}
	}
	return total
}

// offers launches what fits of the tasks still to launch, and declines
// offers it has no use for.
func (r *runner) offers(ctx context.Context, caller calls.Caller, e *scheduler.Event) error {
	var declined []mesos.OfferID
	for _, offer := range e.GetOffers().GetOffers() {
		r.mu.Lock()
		r.sum.Offers++
		if u := offer.GetURL(); u != nil {
			addr := u.GetAddress()
			r.urls[fmt.Sprintf("%s://%s:%d%s", u.GetScheme(), addr.GetIP(), addr.GetPort(),
				u.GetPath())] = true
		}
		cpus, mem := scalar(offer.GetResources(), "cpus"), scalar(offer.GetResources(), "mem")
		var tasks []mesos.TaskInfo
		for r.sum.Launched < r.tasks && cpus >= taskCPUs && mem >= taskMem {
			id := "mg-" + strconv.Itoa(r.sum.Launched)
			command := "echo hello from $MESOS_TASK_ID > out.txt; test -n \"$MESOS_SANDBOX\""
			tasks = append(tasks, mesos.TaskInfo{
				Name:    "mesos-go task " + id,
				TaskID:  mesos.TaskID{Value: id},
				AgentID: offer.GetAgentID(),
				Resources: []mesos.Resource{
					{Name: "cpus", Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: taskCPUs}},
					{Name: "mem", Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: taskMem}},
				},
				Command: &mesos.CommandInfo{Value: &command},
			})
			r.sum.Launched++
			cpus -= taskCPUs
			mem -= taskMem
		}
		r.mu.Unlock()
		if len(tasks) == 0 {
			declined = append(declined, offer.GetID())
			continue
		}
		accept := calls.Accept(
			calls.OfferOperations{calls.OpLaunch(tasks...)}.WithOffers(offer.GetID()),
		).With(calls.RefuseSeconds(time.Minute))
		if err := calls.CallNoData(ctx, caller, accept); err != nil {
			return fmt.Errorf("accept: %w", err)
		}
	}
	if len(declined) > 0 {
		decline := calls.Decline(declined...).With(calls.RefuseSeconds(time.Minute))
		if err := calls.CallNoData(ctx, caller, decline); err != nil {
			return fmt.Errorf("decline: %w", err)
		}
	}
	return nil
}

// update counts a task's end (the library's rule acknowledges it).
func (r *runner) update(e *scheduler.Event) {
	status := e.GetUpdate().GetStatus()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(status.GetUUID()) > 0 {
		r.sum.Acked++
	}
	switch state := status.GetState(); state {
	case mesos.TASK_FINISHED:
		r.sum.Finished++
	case mesos.TASK_FAILED, mesos.TASK_LOST, mesos.TASK_ERROR, mesos.TASK_KILLED,
		mesos.TASK_DROPPED, mesos.TASK_GONE:
		r.sum.Failed = append(r.sum.Failed,
			fmt.Sprintf("%s %s: %s", status.TaskID.Value, state, status.GetMessage()))
	}
	if r.sum.Finished+len(r.sum.Failed) >= r.tasks {
		r.finish()
	}
}

func main() {
	codecName := flag.String("codec", "protobuf", "protobuf or json")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: framework -codec protobuf|json MASTER TASKS")
		os.Exit(2)
	}
	master := flag.Arg(0)
	tasks, err := strconv.Atoi(flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "TASKS:", err)
		os.Exit(2)
	}
	codec := codecs.ByMediaType[codecs.MediaTypeProtobuf]
	if *codecName == "json" {
		codec = codecs.ByMediaType[codecs.MediaTypeJSON]
	}
	r := &runner{tasks: tasks, urls: map[string]bool{}, done: make(chan struct{})}
	r.sum.Codec = string(codec.Type)

	client := httpcli.New(
		httpcli.Endpoint("http://"+master+"/api/v1/scheduler"),
		httpcli.Codec(codec),
		httpcli.Do(httpcli.With(httpcli.Timeout(20*time.Second))),
	)
	ids := store.NewInMemorySingleton()
	caller := callrules.WithFrameworkID(store.GetIgnoreErrors(ids)).Caller(httpsched.NewCaller(client))

	user := "root"
	info := &mesos.FrameworkInfo{User: user, Name: "mesos-go-smoke"}
	ctx, cancel := context.WithCancel(context.Background())
	handler := eventrules.New(
		controller.LiftErrors(),
		controller.TrackSubscription(ids, 0),
		controller.AckStatusUpdates(caller),
	).Handle(events.HandlerFuncs{
		scheduler.Event_OFFERS: func(ctx context.Context, e *scheduler.Event) error {
			return r.offers(ctx, caller, e)
		},
		scheduler.Event_UPDATE: func(_ context.Context, e *scheduler.Event) error {
			r.update(e)
			return nil
		},
	})
	var loopErr error
	go func() {
		loopErr = controller.Run(ctx, info, caller,
			controller.WithEventHandler(handler),
			controller.WithFrameworkID(store.GetIgnoreErrors(ids)),
			controller.WithSubscriptionTerminated(func(err error) {
				if err != nil && ctx.Err() == nil {
					r.mu.Lock()
					r.sum.Failed = append(r.sum.Failed, "subscription: "+err.Error())
					r.mu.Unlock()
					r.finish()
				}
			}),
		)
	}()

	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		r.sum.TimedOut = true
	}
	// Teardown while the subscription still stands (later calls need its
	// stream id), then stop the loop.
	var teardownErr error
	if id, _ := ids.Get(); id != "" {
		teardownErr = calls.CallNoData(context.Background(), caller, &scheduler.Call{Type: scheduler.Call_TEARDOWN})
	}
	cancel()

	r.mu.Lock()
	r.sum.FrameworkID, _ = ids.Get()
	for u := range r.urls {
		r.sum.AgentURLs = append(r.sum.AgentURLs, u)
	}
	if teardownErr != nil {
		r.sum.Failed = append(r.sum.Failed, "teardown: "+teardownErr.Error())
	}
	out, _ := json.Marshal(r.sum)
	ok := !r.sum.TimedOut && r.sum.Finished == tasks && len(r.sum.Failed) == 0
	r.mu.Unlock()
	if loopErr != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "event loop:", loopErr)
	}
	fmt.Println(string(out))
	if !ok {
		os.Exit(1)
	}
}
