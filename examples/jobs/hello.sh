#!/bin/sh
# A job array for `rbs job submit --script`: four tasks, at most two at once.
# The #RBS lines give submit flags, as #SBATCH lines do for sbatch; flags
# typed on the command line win.
#RBS --name hello --array 0-3%2
#RBS --time 5m --cpus 1
echo "task $RBS_ARRAY_INDEX of job $RBS_JOB_ID on $(hostname)"
sleep 1
