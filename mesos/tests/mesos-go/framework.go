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
// With -custom the tasks run on the framework's own executor instead: this
// program again, run by the agent with -executor, on mesos-go's executor
// API client (httpexec). It reports each task's states with its own uuids,
// writes `<task id>/out.txt` in its sandbox, sends the scheduler a message
// per task and records the replies in `replies.txt`; the scheduler then
// also waits for every message.
//
// Usage: framework -codec protobuf|json [-custom] MASTER TASKS
//
//	framework -codec protobuf|json -executor (as the agent starts it)
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
	"github.com/mesos/mesos-go/api/v1/lib/executor"
	execcalls "github.com/mesos/mesos-go/api/v1/lib/executor/calls"
	"github.com/mesos/mesos-go/api/v1/lib/executor/config"
	"github.com/mesos/mesos-go/api/v1/lib/extras/scheduler/callrules"
	"github.com/mesos/mesos-go/api/v1/lib/extras/scheduler/controller"
	"github.com/mesos/mesos-go/api/v1/lib/extras/scheduler/eventrules"
	"github.com/mesos/mesos-go/api/v1/lib/extras/store"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli/httpexec"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler/calls"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler/events"
	"github.com/pborman/uuid"
)

const (
	taskCPUs = 0.5
	taskMem  = 64.0
)

const (
	executorCPUs = 0.1
	executorMem  = 32.0
)

type summary struct {
	FrameworkID string   `json:"framework_id"`
	Messages    []string `json:"messages"`
	Executors   []string `json:"executors"`
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
	mu    sync.Mutex
	tasks int
	// Set with -custom: the executor's command line.
	executor  string
	executors map[string]bool
	sum       summary
	urls      map[string]bool
	done      chan struct{}
	doneOnce  sync.Once
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
		var executor *mesos.ExecutorInfo
		if r.executor != "" {
			id := "go-runner-" + offer.GetAgentID().Value
			command := r.executor
			executor = &mesos.ExecutorInfo{
				ExecutorID: mesos.ExecutorID{Value: id},
				Name:       &id,
				Command:    &mesos.CommandInfo{Value: &command},
				Resources: []mesos.Resource{
					{Name: "cpus", Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: executorCPUs}},
					{Name: "mem", Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: executorMem}},
				},
			}
			if !r.executors[id] {
				cpus -= executorCPUs
				mem -= executorMem
			}
		}
		var tasks []mesos.TaskInfo
		for r.sum.Launched < r.tasks && cpus >= taskCPUs && mem >= taskMem {
			id := "mg-" + strconv.Itoa(r.sum.Launched)
			command := "echo hello from $MESOS_TASK_ID > out.txt; test -n \"$MESOS_SANDBOX\""
			task := mesos.TaskInfo{
				Name:    "mesos-go task " + id,
				TaskID:  mesos.TaskID{Value: id},
				AgentID: offer.GetAgentID(),
				Resources: []mesos.Resource{
					{Name: "cpus", Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: taskCPUs}},
					{Name: "mem", Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: taskMem}},
				},
				Command: &mesos.CommandInfo{Value: &command},
			}
			if executor != nil {
				task.Command = nil
				task.Executor = executor
				r.executors[executor.ExecutorID.Value] = true
			}
			tasks = append(tasks, task)
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
	r.check()
}

// check ends the run once every task ended (and, with -custom, every
// task's message came), or at the first failure.
func (r *runner) check() {
	messagesDone := r.executor == "" || len(r.sum.Messages) >= r.tasks
	if (r.sum.Finished >= r.tasks && messagesDone) || len(r.sum.Failed) > 0 {
		r.finish()
	}
}

// message records an executor's message and answers it.
func (r *runner) message(ctx context.Context, caller calls.Caller, e *scheduler.Event) error {
	m := e.GetMessage()
	r.mu.Lock()
	r.sum.Messages = append(r.sum.Messages, string(m.GetData()))
	r.check()
	r.mu.Unlock()
	reply := calls.Message(m.GetAgentID().Value, m.GetExecutorID().Value, []byte("thanks "+string(m.GetData())))
	return calls.CallNoData(ctx, caller, reply)
}

func main() {
	codecName := flag.String("codec", "protobuf", "protobuf or json")
	custom := flag.Bool("custom", false, "run the tasks on this program as their executor")
	asExecutor := flag.Bool("executor", false, "run as the executor (the agent starts it so)")
	flag.Parse()
	if *asExecutor {
		os.Exit(runExecutor(*codecName))
	}
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
	r := &runner{tasks: tasks, urls: map[string]bool{}, executors: map[string]bool{}, done: make(chan struct{})}
	r.sum.Codec = string(codec.Type)
	if *custom {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "own path:", err)
			os.Exit(2)
		}
		r.executor = self + " -executor -codec " + *codecName
	}

	// With a credential in the environment, every call carries it in HTTP
	// Basic authentication (a master with --authenticate_http_frameworks).
	opts := []httpcli.ConfigOpt{httpcli.Timeout(20 * time.Second)}
	principal := os.Getenv("FRAMEWORK_PRINCIPAL")
	if principal != "" {
		opts = append(opts, httpcli.BasicAuth(principal, os.Getenv("FRAMEWORK_SECRET")))
	}
	client := httpcli.New(
		httpcli.Endpoint("http://"+master+"/api/v1/scheduler"),
		httpcli.Codec(codec),
		httpcli.Do(httpcli.With(opts...)),
	)
	ids := store.NewInMemorySingleton()
	caller := callrules.WithFrameworkID(store.GetIgnoreErrors(ids)).Caller(httpsched.NewCaller(client))

	user := "root"
	info := &mesos.FrameworkInfo{User: user, Name: "mesos-go-smoke"}
	if principal != "" {
		info.Principal = &principal
	}
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
		scheduler.Event_MESSAGE: func(ctx context.Context, e *scheduler.Event) error {
			return r.message(ctx, caller, e)
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
	for e := range r.executors {
		r.sum.Executors = append(r.sum.Executors, e)
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

// runExecutor is the executor: it subscribes to its agent (the
// environment the agent set says where and who it is), runs each LAUNCHed
// task on a goroutine and exits at SHUTDOWN or when its stream ends. Its
// exit code.
func runExecutor(codecName string) int {
	cfg, err := config.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor environment:", err)
		return 2
	}
	codec := codecs.ByMediaType[codecs.MediaTypeProtobuf]
	if codecName == "json" {
		codec = codecs.ByMediaType[codecs.MediaTypeJSON]
	}
	client := httpcli.New(
		httpcli.Endpoint("http://"+cfg.AgentEndpoint+"/api/v1/executor"),
		httpcli.Codec(codec),
		httpcli.Do(httpcli.With(httpcli.Timeout(20*time.Second))),
	)
	sender := execcalls.SenderWith(
		httpexec.NewSender(client.Send),
		execcalls.Framework(cfg.FrameworkID),
		execcalls.Executor(cfg.ExecutorID),
	)
	ctx := context.Background()
	var mu sync.Mutex
	unacknowledged := map[string]mesos.TaskStatus{}
	send := func(call *executor.Call) {
		if err := execcalls.SendNoData(ctx, sender, execcalls.NonStreaming(call)); err != nil {
			fmt.Fprintln(os.Stderr, "executor call:", err)
		}
	}
	report := func(task mesos.TaskID, state mesos.TaskState) {
		id := uuid.NewRandom()
		status := mesos.TaskStatus{
			TaskID:     task,
			State:      state.Enum(),
			Source:     mesos.SOURCE_EXECUTOR.Enum(),
			ExecutorID: &mesos.ExecutorID{Value: cfg.ExecutorID},
			UUID:       []byte(id),
		}
		mu.Lock()
		unacknowledged[id.String()] = status
		mu.Unlock()
		send(execcalls.Update(status))
	}
	resp, err := sender.Send(ctx, execcalls.NonStreaming(execcalls.Subscribe(nil, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor subscribe:", err)
		return 1
	}
	defer resp.Close()
	for {
		var e executor.Event
		if err := resp.Decode(&e); err != nil {
			fmt.Fprintln(os.Stderr, "executor stream ended:", err)
			return 0
		}
		switch e.GetType() {
		case executor.Event_LAUNCH:
			task := e.GetLaunch().Task
			go func() {
				report(task.TaskID, mesos.TASK_RUNNING)
				dir := task.TaskID.Value
				if err := os.MkdirAll(dir, 0o755); err != nil {
					report(task.TaskID, mesos.TASK_FAILED)
					return
				}
				out := []byte("hello from " + task.TaskID.Value + "\n")
				if err := os.WriteFile(dir+"/out.txt", out, 0o644); err != nil {
					report(task.TaskID, mesos.TASK_FAILED)
					return
				}
				send(execcalls.Message([]byte(task.TaskID.Value)))
				report(task.TaskID, mesos.TASK_FINISHED)
			}()
		case executor.Event_KILL:
			report(e.GetKill().TaskID, mesos.TASK_KILLED)
		case executor.Event_ACKNOWLEDGED:
			mu.Lock()
			delete(unacknowledged, uuid.UUID(e.GetAcknowledged().UUID).String())
			mu.Unlock()
		case executor.Event_MESSAGE:
			f, err := os.OpenFile("replies.txt", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				_, _ = f.Write(append(e.GetMessage().Data, '\n'))
				_ = f.Close()
			}
		case executor.Event_SHUTDOWN:
			// How many of its updates the scheduler had not acknowledged
			// (ACKNOWLEDGED events) when its framework went: none.
			mu.Lock()
			left := len(unacknowledged)
			mu.Unlock()
			note := fmt.Sprintf("unacknowledged: %d\n", left)
			if err := os.WriteFile("shutdown.txt", []byte(note), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "shutdown note:", err)
			}
			return 0
		case executor.Event_ERROR:
			fmt.Fprintln(os.Stderr, "executor error:", e.GetError().GetMessage())
			return 1
		}
	}
}
