#include "op.h"

#include <string.h>

struct op_info {
	const char *name;
	bool collective;
};

static const struct op_info op_table[FR_OP__COUNT] = {
#define FR_OP_INFO(e, v, n, coll) [v] = { n, coll },
	FR_OP_TYPES(FR_OP_INFO)
#undef FR_OP_INFO
};

static const char *const state_names[FR_STATE__COUNT] = {
#define FR_STATE_NAME(e, v, n) [v] = n,
	FR_OP_STATES(FR_STATE_NAME)
#undef FR_STATE_NAME
};

const char *fr_op_name(unsigned type)
{
	if (type >= FR_OP__COUNT || !op_table[type].name)
		return "unknown";
	return op_table[type].name;
}

enum fr_op_type fr_op_from_name(const char *name)
{
	for (unsigned i = 0; i < FR_OP__COUNT; i++)
		if (op_table[i].name && strcmp(op_table[i].name, name) == 0)
			return (enum fr_op_type)i;
	return FR_OP_UNKNOWN;
}

bool fr_op_is_collective(unsigned type)
{
	return type < FR_OP__COUNT && op_table[type].collective;
}

bool fr_op_is_rooted(unsigned type)
{
	switch (type) {
	case FR_OP_BROADCAST:
	case FR_OP_REDUCE:
	case FR_OP_GATHER:
	case FR_OP_GATHERV:
	case FR_OP_SCATTER:
	case FR_OP_SCATTERV:
		return true;
	default:
		return false;
	}
}

const char *fr_state_name(unsigned state)
{
	if (state >= FR_STATE__COUNT)
		return "unknown";
	return state_names[state];
}

bool fr_op_ends_together(unsigned type)
{
	return type == FR_OP_ALL_REDUCE || type == FR_OP_ALL_GATHER || type == FR_OP_ALL_GATHERV ||
	       type == FR_OP_REDUCE_SCATTER || type == FR_OP_BARRIER || type == FR_OP_ALL_TO_ALL ||
	       type == FR_OP_ALL_TO_ALLV;
}
