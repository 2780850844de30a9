package cli

// JobCmd is `rbs job`.
type JobCmd struct {
	Submit  JobSubmitCmd  `cmd:"" help:"Submit a job: a command, a script, or a built job target."`
	List    JobListCmd    `cmd:"" help:"List jobs."`
	Show    JobShowCmd    `cmd:"" help:"Show one job in detail."`
	Logs    JobLogsCmd    `cmd:"" help:"Print a job's output."`
	Wait    JobWaitCmd    `cmd:"" help:"Wait for jobs to end."`
	Cancel  JobCancelCmd  `cmd:"" help:"Cancel jobs."`
	Outputs JobOutputsCmd `cmd:"" help:"Download a job's outputs."`
	Queues  JobQueuesCmd  `cmd:"" help:"List queues and their occupancy."`
	Reserve JobReserveCmd `cmd:"" help:"Reserve workers for a maintenance window or a team."`
}

// JobSubmitCmd is `rbs job submit`.
type JobSubmitCmd struct {
	Command []string `arg:"" optional:"" passthrough:"" help:"A //pkg:target, or -- followed by the command to run."`
}

// Run implements the command.
func (c *JobSubmitCmd) Run() error { return notImplemented("job submit") }

// JobListCmd is `rbs job list`.
type JobListCmd struct{}

// Run implements the command.
func (c *JobListCmd) Run() error { return notImplemented("job list") }

// JobShowCmd is `rbs job show`.
type JobShowCmd struct {
	ID string `arg:"" help:"Job id, such as 42 or 42_7."`
}

// Run implements the command.
func (c *JobShowCmd) Run() error { return notImplemented("job show") }

// JobLogsCmd is `rbs job logs`.
type JobLogsCmd struct {
	ID string `arg:"" help:"Job id."`
}

// Run implements the command.
func (c *JobLogsCmd) Run() error { return notImplemented("job logs") }

// JobWaitCmd is `rbs job wait`.
type JobWaitCmd struct {
	IDs []string `arg:"" name:"id" help:"Job ids."`
}

// Run implements the command.
func (c *JobWaitCmd) Run() error { return notImplemented("job wait") }

// JobCancelCmd is `rbs job cancel`.
type JobCancelCmd struct {
	IDs []string `arg:"" name:"id" help:"Job ids."`
}

// Run implements the command.
func (c *JobCancelCmd) Run() error { return notImplemented("job cancel") }

// JobOutputsCmd is `rbs job outputs`.
type JobOutputsCmd struct {
	ID string `arg:"" help:"Job id."`
}

// Run implements the command.
func (c *JobOutputsCmd) Run() error { return notImplemented("job outputs") }

// JobQueuesCmd is `rbs job queues`.
type JobQueuesCmd struct{}

// Run implements the command.
func (c *JobQueuesCmd) Run() error { return notImplemented("job queues") }

// JobReserveCmd is `rbs job reserve`.
type JobReserveCmd struct{}

// Run implements the command.
func (c *JobReserveCmd) Run() error { return notImplemented("job reserve") }
